// Package bulk runs keel's bulk operations on dead and cancelled tasks,
// RetryMatching and PurgeMatching: it applies their filter's defaults,
// checks the filter, and calls the store.
package bulk

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/kerr"
)

// Store is what the bulk operations write.
type Store interface {
	RetryMatching(ctx context.Context, params driver.Filter, now time.Time) (int64, error)
	PurgeMatching(ctx context.Context, params driver.Filter) (int64, error)
}

// Ops runs the bulk operations on a Store.
type Ops struct {
	Store Store
	Now   func() time.Time
	// Wrap turns a write's error into the error returned (the client
	// marks an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error
}

// Retry requeues up to f.Limit tasks that f selects (see Filter) and
// returns how many it moved.
func (o Ops) Retry(ctx context.Context, f driver.Filter) (int64, error) {
	p, err := Filter(f)
	if err != nil {
		return 0, err
	}
	n, err := o.Store.RetryMatching(ctx, p, o.Now())
	if err != nil {
		return 0, o.fail(ctx, "requeue tasks", err)
	}
	return n, nil
}

// Purge deletes up to f.Limit tasks that f selects (see Filter) and
// returns how many it deleted.
func (o Ops) Purge(ctx context.Context, f driver.Filter) (int64, error) {
	p, err := Filter(f)
	if err != nil {
		return 0, err
	}
	n, err := o.Store.PurgeMatching(ctx, p)
	if err != nil {
		return 0, o.fail(ctx, "purge tasks", err)
	}
	return n, nil
}

func (o Ops) fail(ctx context.Context, what string, err error) error {
	if o.Wrap != nil {
		err = o.Wrap(ctx, err)
	}
	return fmt.Errorf("keel: %s: %w", what, err)
}

// Filter applies the defaults of keel's bulk operations
// (RetryMatching, PurgeMatching) to f, state dead and limit 1000, and
// checks it: the error is an ErrInvalid one naming the bad field.
func Filter(f driver.Filter) (driver.Filter, error) {
	f.State, f.Limit = cmp.Or(f.State, driver.StateDead), cmp.Or(f.Limit, 1000)
	if err := enqueue.CheckTimeFilters("finished_after", f.FinishedAfter, "finished_before", f.FinishedBefore); err != nil {
		return f, err
	}
	switch {
	case f.Type != "" && !driver.ValidName(f.Type):
		return f, kerr.Invalid("invalid task type %q", f.Type)
	case f.Queue != "" && !driver.ValidName(f.Queue):
		return f, kerr.Invalid("invalid queue name %q", f.Queue)
	case !f.FinishedAfter.IsZero() && !f.FinishedBefore.IsZero() && !f.FinishedAfter.Before(f.FinishedBefore):
		return f, kerr.Invalid("finished_after must be before finished_before")
	}
	if err := f.ValidateBulk(); err != nil { // dead or cancelled, limit 1..10000, no created or id bounds
		return f, kerr.Invalid("filter %v", err)
	}
	return f, nil
}
