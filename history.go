package keel

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/internal/backlog"
	"github.com/keelq/keel/internal/conv"
	"github.com/keelq/keel/internal/estimator"
)

// HistoryPoint is one step of the history Client.History returns: the
// per-minute counters of every queue and type summed over [At, At+step).
// See the fields of driver.MinuteRow for what each counts.
type HistoryPoint struct {
	At time.Time
	// Enqueued counts inserted tasks; Hits enqueues that found their
	// idempotency key held and returned the existing task.
	Enqueued, Hits int64
	// Attempts counts claims (attempts started); Ended attempts that ended
	// (not given back); Failed those that recorded an error.
	Attempts, Ended, Failed int64
	// Succeeded, Dead and Cancelled count transitions into those states.
	Succeeded, Dead, Cancelled int64
	// DurationMS sums the run time of the attempts that ended.
	DurationMS int64
	// PendingPeak is the most pending tasks (ready, scheduled and
	// retrying, every queue) the leader saw in the step: it samples them
	// every 5 seconds. Sampled is false, and PendingPeak 0, when no
	// sample falls in the step (no leader ran, or the driver keeps none).
	PendingPeak int64
	Sampled     bool
	// Unrecorded is set for a step that ends before the first minute the
	// history holds: the database had recorded nothing yet, or retention
	// has dropped it. Its counters are 0 because nothing is known.
	Unrecorded bool
}

// History reads the per-minute history kept for Config.HistoryRetention
// (default 8 days) from since to now, summed over every queue and type in
// steps of step (a whole number of minutes), aligned to multiples of step
// since the Unix epoch. Every step is returned, zero when nothing
// happened, oldest first; at most 2000 of them. Like Stats it never reads
// the task table, and like Stats it counts users' tasks only: keel's own
// (ReservedQueue) are left out.
func (c *Client) History(ctx context.Context, since time.Time, step time.Duration) ([]HistoryPoint, error) {
	p, err := estimator.Span(since, c.cfg.Now(), step)
	if err != nil {
		return nil, err
	}
	p.Skip = IsKeelTask
	points, err := estimator.History(ctx, c.drv, p)
	if err != nil {
		return nil, fmt.Errorf("keel: read task history: %w", unavailable(ctx, err))
	}
	return conv.Slice(points, func(p estimator.Point) HistoryPoint { return HistoryPoint(p) }), nil
}

// newBacklogSampler returns the sampler of the peaks History reports,
// which samples on the leader only.
func newBacklogSampler(c *Client, store backlog.Store) *backlog.Sampler {
	return backlog.New(backlog.Config{Driver: store, Retention: c.cfg.HistoryRetention, Now: c.cfg.Now, Logger: c.cfg.Logger,
		Wrap: unavailable, Leading: func() bool { return c.eng.Load().Leading() }})
}
