package sqlutil

import (
	"context"
	"errors"

	"github.com/keelq/keel/driver"
)

// AppliedBefore reports whether row, read after a Finish that did not
// apply t, shows t applied by an earlier write of owner: a finish retried
// after a commit whose outcome was unknown (the connection broke at or
// after COMMIT) finds the task in the state it wrote. That is: the state t
// writes, at t's fence (a later claim moves the fence on), and
//   - for a success, still under owner (a success keeps the owner);
//   - for a retry or a dead letter with an error, which clear the owner,
//     t's error as the last of the history (same attempt, outcome and
//     start, and owner's node): a rescue of the attempt writes an entry
//     of its own;
//   - for a snooze or a release (no error), no rescue of this attempt as
//     the last entry.
//
// A cancel, a rescue or another worker's claim is never taken for it.
func AppliedBefore(row *driver.TaskRow, owner string, t driver.Transition) bool {
	if row == nil || row.ID != t.ID || row.Fence != t.Fence || row.State != t.State {
		return false
	}
	switch t.State {
	case driver.StateSucceeded:
		return row.LeaseOwner == owner
	case driver.StatePending, driver.StateDead:
	default:
		return false
	}
	if row.LeaseOwner != "" {
		return false
	}
	var last *driver.AttemptError
	if n := len(row.Errors); n > 0 {
		last = &row.Errors[n-1]
	}
	if t.Error != nil {
		return last != nil && last.Attempt == t.Error.Attempt && last.Node == t.Error.Node && last.Node == owner &&
			last.Outcome == t.Error.Outcome && last.Start.Equal(t.Error.Start)
	}
	return last == nil || last.Outcome != driver.OutcomeLeaseExpired || !last.Start.Equal(row.AttemptedAt)
}

// AddAppliedBefore returns applied, the ids a Finish of p applied, with
// those of p's other transitions that had applied before (AppliedBefore),
// each read with get: a retried finish reports a write of its own as done,
// not as a lost lease. It reads nothing when every transition applied.
func AddAppliedBefore(ctx context.Context, p driver.FinishParams, applied []int64,
	get func(ctx context.Context, id int64) (*driver.TaskRow, error)) ([]int64, error) {
	if len(applied) == len(p.Transitions) {
		return applied, nil
	}
	done := make(map[int64]bool, len(applied))
	for _, id := range applied {
		done[id] = true
	}
	for _, t := range p.Transitions {
		if done[t.ID] {
			continue
		}
		row, err := get(ctx, t.ID)
		if errors.Is(err, driver.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if AppliedBefore(row, p.Owner, t) {
			applied = append(applied, t.ID)
		}
	}
	return applied, nil
}
