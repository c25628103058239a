package keel

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
)

// backlogInterval is how often the leader samples the pending tasks for
// the peaks History reports: a burst that comes and goes within one
// interval can be missed.
const backlogInterval = 5 * time.Second

// backlogLoop runs in every started client; only the leader samples. The
// history counts what happened in each minute, not how many tasks waited,
// so without the samples a burst that arrives and drains within a minute
// would not show.
func (c *Client) backlogLoop() (engine.Loop, bool) {
	store, ok := c.drv.(driver.BacklogStore)
	if !ok {
		return engine.Loop{}, false
	}
	var dropped int64 // the minute old peaks were last dropped in
	var failures int
	return engine.Loop{Interval: backlogInterval, Run: func(ctx context.Context) {
		if e := c.eng.Load(); e == nil || !e.Leading() {
			return
		}
		minute, err := c.sampleBacklog(ctx, store, dropped)
		switch {
		case err == nil:
			dropped, failures = minute, 0
		case ctx.Err() == nil:
			if failures%12 == 0 { // once a minute while it lasts
				c.cfg.Logger.Warn("keel: sampling the backlog failed; retried every 5s", "error", err, "failures_in_a_row", failures+1)
			}
			failures++
		}
	}}, true
}

// sampleBacklog stores the pending tasks (ready, scheduled and retrying,
// every queue) as a sample of the current minute, read from the live
// counters, and drops peaks older than the history's retention once a
// minute (when the minute differs from dropped). It returns the minute.
func (c *Client) sampleBacklog(ctx context.Context, store driver.BacklogStore, dropped int64) (int64, error) {
	rows, err := c.drv.Counts(ctx)
	if err != nil {
		return 0, unavailable(ctx, err)
	}
	var pending int64
	for _, r := range rows {
		if kindState(r.Kind) == StatePending {
			pending += r.N
		}
	}
	now := c.cfg.Now()
	s := driver.BacklogSample{Minute: driver.DueMinute(now), Pending: pending}
	if s.Minute != dropped {
		s.DropBefore = max(driver.DueMinute(now.Add(-c.cfg.HistoryRetention)), 0)
	}
	if err := store.RecordBacklog(ctx, s); err != nil {
		return 0, unavailable(ctx, err)
	}
	return s.Minute, nil
}
