package engine

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
)

// Fallbacks when a task dies: a transition that dead-letters a task
// carries the task's on_dead follow-ups (Config.FollowUps builds them), and
// the driver inserts them in the same transaction, only when the
// transition applies. Both the worker and the rescuer decide through here.

// followUpTimeout bounds building one dead task's follow-ups (a read of
// its type's stored declaration, of its payload for the rescuer).
const followUpTimeout = 10 * time.Second

// followUpRetry is how long a task whose follow-ups could not be built
// waits before it runs again.
const followUpRetry = 5 * time.Second

// withFollowUps adds the follow-ups of a dead-lettering transition; ok is
// false when they could not be built (the error is logged).
func (e *Engine) withFollowUps(row *driver.TaskRow, t driver.Transition) (driver.Transition, bool) {
	if t.State != driver.StateDead || e.cfg.FollowUps == nil {
		return t, true
	}
	ctx, cancel := context.WithTimeout(e.workCtx, followUpTimeout)
	defer cancel()
	fu, err := e.cfg.FollowUps(ctx, row, t)
	if err != nil {
		e.cfg.Logger.Warn("keel: building a dead task's on_dead follow-ups failed; it is not dead-lettered yet",
			"task_id", row.ID, "type", row.Type, "error", err)
		return t, false
	}
	t.FollowUps = fu
	return t, true
}

// deadWithFollowUps is decide's last step: a task that dies gets its
// follow-ups, or, when they cannot be built now, runs again after
// followUpRetry with its attempt refunded (the failed attempt stays in its
// history), so that it never dies without them.
func (e *Engine) deadWithFollowUps(row *driver.TaskRow, t driver.Transition, end time.Time) driver.Transition {
	out, ok := e.withFollowUps(row, t)
	if ok {
		return out
	}
	t.State, t.RunAt, t.Refund = driver.StatePending, end.Add(followUpRetry), true
	return t
}
