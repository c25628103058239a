package estimator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

// MaxPoints bounds the steps of one History request.
const MaxPoints = 2000

// Span checks a request for the history from since to now in steps of
// step, a whole number of minutes aligned to multiples of step since the
// Unix epoch, at most MaxPoints of them, and returns the steps it asks
// for. Its error is an ErrInvalid one.
func Span(since, now time.Time, step time.Duration) (HistoryParams, error) {
	if step < time.Minute || step%time.Minute != 0 {
		return HistoryParams{}, kerr.Invalid("history step must be a whole number of minutes, got %v", step)
	}
	if since.IsZero() || !since.Before(now) {
		return HistoryParams{}, kerr.Invalid("history since must be before now")
	}
	first := since.Truncate(step)
	n := int(now.Sub(first)/step) + 1
	if n > MaxPoints {
		return HistoryParams{}, kerr.Invalid("history from %v in steps of %v is %d points, more than %d",
			since.Format(time.RFC3339), step, n, MaxPoints)
	}
	return HistoryParams{First: first, Step: step, N: n}, nil
}

// RecentStore is what ReadLatency reads.
type RecentStore interface {
	RecentFinished(ctx context.Context, params driver.RecentParams) ([]driver.FinishedSample, error)
}

// ReadLatency checks p (a Limit of 0 reads 1000) and returns the Latency
// of the newest finished tasks it selects, leaving out those skip
// accepts. wrap, when set, turns the read's error into the error
// returned.
func ReadLatency(ctx context.Context, store RecentStore, p driver.RecentParams, skip func(queue, taskType string) bool,
	wrap func(context.Context, error) error) (Latency, error) {
	if p.Limit < 0 || p.Limit > driver.MaxRecentLimit {
		return Latency{}, kerr.Invalid("latency limit must be in 0..%d, got %d", driver.MaxRecentLimit, p.Limit)
	}
	p.Limit = cmp.Or(p.Limit, 1000)
	rows, err := store.RecentFinished(ctx, p)
	if err != nil {
		if wrap != nil {
			err = wrap(ctx, err)
		}
		return Latency{}, fmt.Errorf("keel: read recent finished tasks: %w", err)
	}
	return LatencyOf(slices.DeleteFunc(rows, func(r driver.FinishedSample) bool { return skip != nil && skip(r.Queue, r.Type) })), nil
}
