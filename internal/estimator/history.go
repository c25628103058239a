package estimator

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
)

// HistoryStore is what History reads: the per-minute history and, when
// the store is also a driver.BacklogStore, the sampled backlog peaks and
// the first minute the history holds.
type HistoryStore interface {
	Minutes(ctx context.Context, since time.Time) ([]driver.MinuteRow, error)
}

// HistoryParams selects the steps of a History.
type HistoryParams struct {
	// First is the start of the first step, Step the steps' length and N
	// their number.
	First time.Time
	Step  time.Duration
	N     int
	// Skip, when set, leaves out the rows of a queue and type it accepts.
	Skip func(queue, taskType string) bool
}

// Point is one step of a History (keel's HistoryPoint, whose fields it
// mirrors): the history's counters summed over [At, At+step), the largest
// sampled backlog in it, and whether the history held the step at all.
type Point struct {
	At                         time.Time
	Enqueued, Hits             int64
	Attempts, Ended, Failed    int64
	Succeeded, Dead, Cancelled int64
	DurationMS                 int64
	PendingPeak                int64
	Sampled                    bool
	Unrecorded                 bool
}

// History sums the history's minutes into p.N steps from p.First on,
// every step present (zero when nothing happened), oldest first. With a
// driver.BacklogStore it also sets each step's backlog peak and marks the
// steps that end before the first minute the history holds.
func History(ctx context.Context, store HistoryStore, p HistoryParams) ([]Point, error) {
	rows, err := store.Minutes(ctx, p.First)
	if err != nil {
		return nil, err
	}
	step := func(minute int64) (int, bool) {
		i := int(time.Unix(minute*60, 0).Sub(p.First) / p.Step)
		return i, i >= 0 && i < p.N
	}
	sums := make([]driver.MinuteRow, p.N)
	for _, m := range rows {
		if p.Skip != nil && p.Skip(m.Queue, m.Type) {
			continue
		}
		if i, ok := step(m.Minute); ok {
			sums[i].Add(m)
		}
	}
	out := make([]Point, p.N)
	for i, m := range sums {
		out[i] = Point{At: p.First.Add(time.Duration(i) * p.Step), Enqueued: m.Enqueued, Hits: m.Hits,
			Attempts: m.Attempts, Ended: m.Ended, Failed: m.Failed, Succeeded: m.Succeeded, Dead: m.Dead,
			Cancelled: m.Cancelled, DurationMS: m.DurationMS}
	}
	backlog, ok := store.(driver.BacklogStore)
	if !ok {
		return out, nil
	}
	start, held, err := backlog.FirstMinute(ctx)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if !held || !out[i].At.Add(p.Step).After(time.Unix(start*60, 0)) {
			out[i].Unrecorded = true
		}
	}
	peaks, err := backlog.BacklogPeaks(ctx, driver.DueMinute(p.First))
	if err != nil {
		return nil, err
	}
	for _, pk := range peaks {
		if i, ok := step(pk.Minute); ok {
			out[i].PendingPeak = max(out[i].PendingPeak, pk.Pending)
			out[i].Sampled = true
		}
	}
	return out, nil
}
