package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/outcome"
	"github.com/keelq/keel/internal/shorten"
)

// decide maps an attempt's result to the task's next state: every
// retry-or-dead decision of a running attempt is made here.
func (e *Engine) decide(ctx context.Context, row *driver.TaskRow, res result, start, end time.Time) driver.Transition {
	return e.deadWithFollowUps(row, e.decideState(ctx, row, res, start, end), end)
}

// decideState is decide without the follow-ups of a dead task.
func (e *Engine) decideState(ctx context.Context, row *driver.TaskRow, res result, start, end time.Time) driver.Transition {
	t := driver.Transition{ID: row.ID, Fence: row.Fence, Task: row, Ended: end}
	if res.err == nil {
		t.State, t.Result = driver.StateSucceeded, res.value
		return t
	}
	if errors.Is(context.Cause(ctx), ErrStopping) {
		// Shutdown cut the attempt short: release the task, attempt refunded.
		t.State, t.RunAt, t.Refund = driver.StatePending, end, true
		return t
	}
	if d, ok := outcome.AsSnooze(res.err); ok {
		if limit := e.maxSnoozes(row.Type); limit > 0 && row.Snoozes >= limit {
			// A task that snoozes forever would never finish: past its
			// maximum, a snooze dead-letters it.
			t.State, t.Error = driver.StateDead, &driver.AttemptError{Attempt: row.Attempt, Node: e.cfg.Node,
				Start: start, End: end, Outcome: driver.OutcomeSnoozed,
				Error: fmt.Sprintf("snoozed again after %d snoozes, the maximum for this task: dead-lettered", row.Snoozes)}
			return t
		}
		t.State, t.RunAt, t.Refund, t.Snooze = driver.StatePending, end.Add(d), true, true
		return t
	}
	ae := &driver.AttemptError{Attempt: row.Attempt, Node: e.cfg.Node, Start: start, End: end,
		Outcome: driver.OutcomeError, Error: shorten.String(res.err.Error(), 4096), Stack: shorten.String(res.stack, 16384)}
	t.Error = ae
	switch {
	case res.panic:
		ae.Outcome = driver.OutcomePanic
	case errors.Is(res.err, ErrTimeout) || outcome.IsTimeout(res.err):
		ae.Outcome = driver.OutcomeTimeout
	case outcome.AsPermanent(res.err):
		ae.Outcome = driver.OutcomePermanent
	}
	delay, ok := outcome.AsRetryAfter(res.err)
	if !ok {
		delay = e.backoff(row.Type, row.Attempt)
	}
	return retryOrDead(t, row, end.Add(delay))
}

// decideExpired maps a task whose lease expired (its worker vanished) to
// its next state, as the rescuer judged it at now, with the type's
// runtime settings applied as for a claimed task.
//
// A task that dies gets its on_dead follow-ups; when they cannot be built
// now, the zero transition leaves the task to the rescuer's next pass.
func (e *Engine) decideExpired(row *driver.TaskRow, now time.Time) driver.Transition {
	e.applyTypeSettings(row)
	t, ok := e.withFollowUps(row, ExpiredTransition(row, now, e.backoff(row.Type, row.Attempt)))
	if !ok {
		return driver.Transition{}
	}
	return t
}

// ExpiredTransition is the transition of a task whose lease expired before
// now: the attempt failed with outcome lease_expired and the task is
// retried after delay or dead-lettered on its last attempt, like any
// failed attempt. A retried task keeps its place in line: its next run_at
// is the run_at it was claimed at plus delay, so a backlog enqueued since
// does not push it back. driver/drivertest decides with it too.
func ExpiredTransition(row *driver.TaskRow, now time.Time, delay time.Duration) driver.Transition {
	t := driver.Transition{ID: row.ID, Fence: row.Fence, Task: row, Error: &driver.AttemptError{
		Attempt: row.Attempt, Node: row.LeaseOwner, Start: row.AttemptedAt, End: now,
		Outcome: driver.OutcomeLeaseExpired, Error: "lease expired: worker lost",
	}}
	return retryOrDead(t, row, row.RunAt.Add(delay))
}

// retryOrDead completes a failed attempt's transition t: dead when the
// failure is permanent or the attempts are used up, otherwise pending
// again at retryAt. The worker and the rescuer both decide with it.
func retryOrDead(t driver.Transition, row *driver.TaskRow, retryAt time.Time) driver.Transition {
	if t.Error.Outcome == driver.OutcomePermanent || row.Attempt >= row.MaxAttempts {
		t.State, t.RunAt = driver.StateDead, time.Time{}
		return t
	}
	t.State, t.RunAt = driver.StatePending, retryAt
	return t
}

// maxSnoozes is how often a task of taskType may snooze: its registered
// maximum, else the configured one; 0 means no bound.
func (e *Engine) maxSnoozes(taskType string) int {
	if n, ok := e.cfg.TypeMaxSnoozes[taskType]; ok {
		return n
	}
	return e.cfg.MaxSnoozes
}

// backoff returns the retry delay for a task type after attempt: the
// type's runtime settings over its registered policy over the default.
func (e *Engine) backoff(taskType string, attempt int) time.Duration {
	p := e.cfg.Backoff
	if tp, ok := e.cfg.TypeBackoff[taskType]; ok {
		p.Base, p.Max = tp.Base, tp.Max
	}
	if s, ok := e.settings.get().types[taskType]; ok {
		if s.BackoffBase > 0 {
			p.Base = s.BackoffBase
		}
		if s.BackoffMax > 0 {
			p.Max = s.BackoffMax
		}
		p.Max = max(p.Max, p.Base)
	}
	return p.Delay(attempt)
}
