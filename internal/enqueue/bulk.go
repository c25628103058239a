package enqueue

import (
	"cmp"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

// BulkFilter applies the defaults of keel's bulk operations
// (RetryMatching, PurgeMatching) to f, state dead and limit 1000, and
// checks it: the error is an ErrInvalid one naming the bad field.
func BulkFilter(f driver.Filter) (driver.Filter, error) {
	f.State, f.Limit = cmp.Or(f.State, driver.StateDead), cmp.Or(f.Limit, 1000)
	if err := CheckTimeFilters("finished_after", f.FinishedAfter, "finished_before", f.FinishedBefore); err != nil {
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
