package keel

import (
	"context"
	"encoding/json"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/conv"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/scheduler"
)

// Periodic tasks.
//
// A Schedule enqueues a task of its Type on every tick of its Spec, a cron
// expression read in its TimeZone. Schedules are given in
// Config.Schedules and stored in keel_schedules when the client starts
// (the definition in the config wins; a pause set through the API stays).
// Only the elected leader enqueues ticks, and each tick once: in one
// transaction the leader moves the schedule's last tick forward with a
// compare-and-set and inserts the tick's task, so a second leader (during
// a leader change) finds the tick taken and writes nothing, even when the
// first tick's task already finished, was dead-lettered or archived.

// MissedPolicy says what a schedule does with ticks that came due while
// no leader enqueued them (every process down, a leader change).
type MissedPolicy string

// The missed-tick policies.
const (
	// MissedRunOnce enqueues one task for the latest tick that came due,
	// at once; the earlier missed ticks never run. The default.
	MissedRunOnce MissedPolicy = driver.MissedRunOnce
	// MissedSkip enqueues nothing for missed ticks: the latest due tick
	// runs only if the leader reaches it within SkipGrace of its time,
	// and the schedule otherwise waits for its next tick.
	MissedSkip MissedPolicy = driver.MissedSkip
)

// SkipGrace is how late a tick may be enqueued under MissedSkip: a tick
// found due longer ago than this counts as missed.
const SkipGrace = scheduler.SkipGrace

// Schedule is a periodic task: a task of Type enqueued on every tick of
// Spec.
type Schedule struct {
	// Name identifies the schedule: 1–128 letters, digits and _ . : -.
	// Required.
	Name string
	// Spec is when it runs: a cron expression of five fields (minute,
	// hour, day of month, month, day of week: "*/5 * * * *"), or six with
	// seconds first ("*/10 * * * * *"), or a descriptor ("@hourly",
	// "@daily", "@weekly", "@monthly", "@yearly", "@every 90s"). An
	// "@every" interval counts from when the schedule was first stored,
	// in whole seconds. Required.
	Spec string
	// TimeZone is the IANA zone the cron fields are read in
	// ("Europe/Berlin"). Default "UTC".
	TimeZone string
	// Type is the task type enqueued. It needs no handler in this
	// process: another process may run it. Required.
	Type string
	// Queue is the queue the tasks go to. Default "default".
	Queue string
	// Payload is every task's payload, encoded as JSON ([]byte and
	// json.RawMessage must be JSON already), at most 64 KiB. Default {}.
	Payload any
	// Priority is the tasks' priority. Default 0.
	Priority int
	// Missed is what happens to ticks missed while no leader ran.
	// Default MissedRunOnce.
	Missed MissedPolicy
}

// ScheduleInfo is a stored schedule, as Client.Schedules lists it.
type ScheduleInfo struct {
	Name, Spec, TimeZone, Type, Queue string
	Payload                           json.RawMessage
	Priority                          int
	Missed                            MissedPolicy
	// Paused schedules enqueue nothing; a resume does not run the ticks
	// of the paused period.
	Paused bool
	// LastTick is the last tick enqueued (or passed over as missed), in
	// the schedule's zone; when no tick ran yet, the instant the schedule
	// was first stored.
	LastTick time.Time
	// NextRun is the next tick after now, in the schedule's zone; zero
	// while paused, or when the spec has no further tick.
	NextRun time.Time
	// Due is set when a tick came due that no leader enqueued yet (none
	// runs, or it is about to).
	Due bool
	// Error says why this process cannot read the spec or zone (a zone
	// this host has no data for); such a schedule runs on a leader that
	// can.
	Error     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Validate reports what is wrong with s (ErrInvalid), naming the
// schedule and the field; NewClient checks Config.Schedules with it.
func (s Schedule) Validate() error {
	_, err := s.definition().Params()
	return err
}

// definition is s as internal/enqueue checks it.
func (s Schedule) definition() enqueue.Schedule {
	return enqueue.Schedule{Name: s.Name, Spec: s.Spec, TimeZone: s.TimeZone, Type: s.Type, Queue: s.Queue,
		Payload: s.Payload, Priority: s.Priority, Missed: string(s.Missed)}
}

// newScheduler returns the service that enqueues c's schedules' ticks.
func newScheduler(c *Client) *scheduler.Scheduler {
	return scheduler.New(scheduler.Config{
		Driver: c.drv, Schedules: c.schedules, Now: c.cfg.Now, Logger: c.cfg.Logger, Wrap: unavailable,
		Leading: func() bool { return c.eng.Load().Leading() },
		Task: func(ctx context.Context, s *driver.ScheduleRow, key string, meta map[string]string, now time.Time) (*driver.InsertParams, error) {
			return c.prep.ScheduleTask(ctx, c.decl.Stored, s, key, meta, now)
		},
		Enqueued: c.scheduled,
	})
}

// Schedules lists the stored schedules by name, each with its next run
// in its own zone.
func (c *Client) Schedules(ctx context.Context) ([]*ScheduleInfo, error) {
	rows, err := c.sched.List(ctx)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	return conv.Rows(rows, func(r *driver.ScheduleRow) *ScheduleInfo { return scheduleInfo(r, now) }), nil
}

// GetSchedule returns one stored schedule; ErrNotFound when there is no
// such schedule.
func (c *Client) GetSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	row, err := c.sched.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return scheduleInfo(row, c.cfg.Now()), nil
}

// PauseSchedule pauses a schedule in every process: the leader enqueues
// none of its ticks until ResumeSchedule. ErrNotFound for an unknown name.
func (c *Client) PauseSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	return c.pauseSchedule(ctx, name, true)
}

// ResumeSchedule resumes a paused schedule. The ticks of the paused period
// never run, whatever its missed policy: the next tick after the resume
// is the first. ErrNotFound for an unknown name.
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*ScheduleInfo, error) {
	return c.pauseSchedule(ctx, name, false)
}

func (c *Client) pauseSchedule(ctx context.Context, name string, paused bool) (*ScheduleInfo, error) {
	now := c.cfg.Now()
	row, err := c.sched.Pause(ctx, name, paused, now)
	if err != nil {
		return nil, err
	}
	return scheduleInfo(row, now), nil
}

// DeleteSchedule deletes a stored schedule; the tasks it enqueued stay. A
// schedule still in some process's Config.Schedules comes back when that
// process starts. ErrNotFound for an unknown name.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.sched.Delete(ctx, name)
}

// TriggerSchedule enqueues one task of the schedule now, also while it is
// paused, with the idempotency key "keel.schedule:<name>:manual:<unix
// nanoseconds>". The schedule's ticks are not moved.
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*TaskInfo, error) {
	res, err := c.sched.Trigger(ctx, name)
	if err != nil {
		return nil, err
	}
	info := infoFromRow(res.Task)
	info.Duplicate = res.Duplicate
	return info, nil
}

// scheduled tells this process's workers and observers about a task of
// schedule name that was inserted (or found holding its key).
func (c *Client) scheduled(name string, res *driver.InsertResult) {
	if !res.Duplicate {
		c.eng.Load().Wrote(res.Task)
	}
	if c.obs.active() {
		t := res.Task
		c.obs.emit(Event{Kind: EventEnqueued, TaskID: t.ID, Queue: t.Queue, Type: t.Type, Duplicate: res.Duplicate,
			State: t.State, Schedule: name})
	}
}

// scheduleInfo turns a row into what the API shows, in the row's zone.
func scheduleInfo(r *driver.ScheduleRow, now time.Time) *ScheduleInfo {
	t := scheduler.Describe(r, now)
	return &ScheduleInfo{Name: r.Name, Spec: r.Spec, TimeZone: r.TimeZone, Type: r.Type, Queue: r.Queue,
		Payload: r.Payload, Priority: r.Priority, Missed: MissedPolicy(r.Missed), Paused: r.Paused,
		LastTick: t.LastTick, NextRun: t.NextRun, Due: t.Due, Error: t.Error, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}
