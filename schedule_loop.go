package keel

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
)

// scheduleInterval is how often the leader looks for due ticks: a tick is
// enqueued within about this long of its time.
const scheduleInterval = time.Second

// scheduleLoop runs in every started client; only the leader enqueues.
// It reads every stored schedule, not only this process's configured ones,
// so a schedule runs whichever process leads.
func (c *Client) scheduleLoop() engine.Loop {
	var warned sync.Map // schedule name + spec + zone: unreadable, logged once
	var failures int    // in a row, to log a lasting failure every minute only
	return engine.Loop{Interval: scheduleInterval, Run: func(ctx context.Context) {
		e := c.engine()
		if e == nil || !e.Leading() {
			return
		}
		err := c.runSchedules(ctx, &warned)
		switch {
		case err == nil:
			failures = 0
		case ctx.Err() == nil:
			if failures%60 == 0 {
				c.cfg.Logger.Warn("keel: enqueuing due schedule ticks failed; retried every second", "error", err, "failures_in_a_row", failures+1)
			}
			failures++
		}
	}}
}

// runSchedules enqueues the due tick of every schedule that has one.
func (c *Client) runSchedules(ctx context.Context, warned *sync.Map) error {
	rows, err := c.drv.ListSchedules(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for i := range rows {
		r := &rows[i]
		if r.Paused {
			continue
		}
		sched, _, err := parseSchedule(r.Spec, r.TimeZone)
		if err != nil {
			if _, seen := warned.LoadOrStore(r.Name+"\n"+r.Spec+"\n"+r.TimeZone, true); !seen {
				c.cfg.Logger.Error("keel: this process cannot read a schedule; its ticks wait for a leader that can",
					"schedule", r.Name, "error", err)
			}
			continue
		}
		if err := c.runSchedule(ctx, r, sched); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d schedules: %w", len(errs), errs[0])
	}
	return nil
}

// runSchedule enqueues the latest due tick of r, if any, under its missed
// policy: the ticks before it are passed over.
func (c *Client) runSchedule(ctx context.Context, r *driver.ScheduleRow, sched cron.Schedule) error {
	now := c.cfg.Now()
	tick, many := latestDue(sched, r.LastTick, now)
	if tick.IsZero() {
		return nil
	}
	missed := many || now.Sub(tick) > SkipGrace
	var task *driver.InsertParams
	if r.Missed != driver.MissedSkip || now.Sub(tick) <= SkipGrace {
		key := fmt.Sprintf("%s%s:%d", scheduleKeyPrefix, r.Name, tick.Unix())
		var err error
		task, err = c.scheduleTask(ctx, r, key, map[string]string{metaSchedule: r.Name, metaTick: tick.UTC().Format(time.RFC3339)}, now)
		if err != nil {
			return err
		}
	}
	res, advanced, err := c.drv.EnqueueTick(ctx, driver.TickParams{Name: r.Name, Prev: r.LastTick, Tick: tick, Task: task, Now: now})
	if err != nil {
		return fmt.Errorf("schedule %s: %w", r.Name, err)
	}
	switch {
	case !advanced:
		// Another leader took the tick, or the schedule was paused.
	case res == nil:
		c.cfg.Logger.Warn("keel: schedule ticks missed and skipped", "schedule", r.Name,
			"last_tick", r.LastTick, "latest_due", tick, "policy", r.Missed)
	default:
		if missed {
			c.cfg.Logger.Warn("keel: schedule ticks missed; one task runs for the latest", "schedule", r.Name,
				"last_tick", r.LastTick, "tick", tick, "task_id", res.Task.ID)
		}
		c.cfg.Logger.Debug("keel: schedule tick enqueued", "schedule", r.Name, "tick", tick, "task_id", res.Task.ID,
			"type", res.Task.Type, "queue", res.Task.Queue)
		if !res.Duplicate {
			c.wrote(res.Task)
		}
		if c.obs.active() {
			c.obs.emit(Event{Kind: EventEnqueued, TaskID: res.Task.ID, Queue: res.Task.Queue, Type: res.Task.Type,
				Duplicate: res.Duplicate, State: res.Task.State, Schedule: r.Name})
		}
	}
	return nil
}

// latestDue returns the latest tick of sched after last that is not after
// now (zero: none is due), and whether more than one came due.
func latestDue(sched cron.Schedule, last, now time.Time) (time.Time, bool) {
	first := sched.Next(last)
	if first.IsZero() || first.After(now) {
		return time.Time{}, false
	}
	second := sched.Next(first)
	if second.IsZero() || second.After(now) {
		return first, false
	}
	if d, ok := sched.(cron.ConstantDelaySchedule); ok {
		n := now.Sub(last) / d.Delay
		return last.Add(n * d.Delay), true
	}
	// Look back from now over growing windows: the latest tick in the
	// first window holding one is the latest of all.
	latest := second
	for _, w := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour, 0} {
		from := now.Add(-w)
		if w == 0 || from.Before(second) {
			from = second
		}
		for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
			latest = t
		}
		if latest.After(second) || from.Equal(second) {
			return latest, true
		}
	}
	return latest, true
}

// nextAfter returns the first tick of sched's sequence from last that is
// after t (zero: none). An "@every" schedule counts from last.
func nextAfter(sched cron.Schedule, last, t time.Time) time.Time {
	if !t.After(last) {
		return sched.Next(last)
	}
	if d, ok := sched.(cron.ConstantDelaySchedule); ok {
		n := t.Sub(last)/d.Delay + 1
		return last.Add(n * d.Delay)
	}
	return sched.Next(t)
}
