package enqueue

import (
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

// CheckList refuses a filter that keel.Client.List cannot answer alike on
// every database: an unknown state, a limit outside 0..1000, ids (which
// only RetryMatching and PurgeMatching take), negative paging ids, times
// out of range or in the wrong order, names that are not valid or text
// that cannot be stored.
func CheckList(p driver.Filter) error {
	invalid := kerr.Invalid
	switch {
	case p.State != "" && !p.State.Valid():
		return invalid("unknown state %q: use pending, running, succeeded, dead or cancelled", p.State)
	case p.Limit < 0 || p.Limit > 1000:
		return invalid("limit must be in 0..1000, got %d", p.Limit)
	case p.IDs != nil:
		return invalid("ids select tasks for RetryMatching and PurgeMatching only; use Get for one task")
	case p.BeforeID < 0 || p.AfterID < 0:
		return invalid("before_id and after_id must not be negative, got %d and %d", p.BeforeID, p.AfterID)
	}
	if err := CheckTimeFilters("created_after", p.CreatedAfter, "created_before", p.CreatedBefore,
		"finished_after", p.FinishedAfter, "finished_before", p.FinishedBefore); err != nil {
		return err
	}
	switch {
	case !ordered(p.CreatedAfter, p.CreatedBefore):
		return invalid("created_after must be before created_before")
	case !ordered(p.FinishedAfter, p.FinishedBefore):
		return invalid("finished_after must be before finished_before")
	}
	if err := CheckText("type filter", p.Type); err != nil {
		return err
	}
	if err := CheckText("queue filter", p.Queue); err != nil {
		return err
	}
	if err := p.ValidateNames(); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// ordered reports whether the bounds after and before, either zero for
// none, leave a window.
func ordered(after, before time.Time) bool {
	return after.IsZero() || before.IsZero() || after.Before(before)
}

// CheckKey refuses an idempotency key to look up (keel.Client.GetByKey)
// that no task can hold, as the IdempotencyKey option would refuse it.
func CheckKey(key string) error {
	if key == "" || len(key) > 255 {
		return kerr.Invalid("idempotency key must be 1-255 bytes, got %d", len(key))
	}
	return CheckText("idempotency key", key)
}
