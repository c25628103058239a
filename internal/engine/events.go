package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/logevent"
)

// attemptEnded reports an attempt whose outcome the completer stored
// (applied), found rejected (!applied) or failed to write (err): to the
// Observer, and as one log record per state change: success and snooze
// at DEBUG, a retry at WARN, dead-lettering at ERROR, a release on
// shutdown at DEBUG (no attempt used).
func (e *Engine) attemptEnded(ex *execution, t driver.Transition, dur time.Duration, applied bool, err error, completedTx bool) {
	row := ex.row
	end := AttemptEnd{TaskID: row.ID, Queue: row.Queue, Type: row.Type, Attempt: row.Attempt, Node: e.cfg.Node,
		Duration: dur, CommitLatency: time.Since(ex.returned), State: t.State, Applied: applied && err == nil, Err: err}
	switch {
	case completedTx:
		// The handler's own transaction stored the success.
		end.Kind, end.State, end.Applied = KindSucceeded, driver.StateSucceeded, true
	case t.Snooze:
		end.Kind = KindSnoozed
	case t.Refund:
		end.Kind = KindReleased
	case t.Error != nil:
		end.Kind, end.Error = string(t.Error.Outcome), t.Error.Error
	default:
		end.Kind = KindSucceeded
	}
	if o := e.cfg.Observer; o != nil {
		o.Finished(end)
	}

	log := e.cfg.Logger
	level, msg := slog.LevelDebug, ""
	switch {
	case err != nil:
		level, msg = slog.LevelError, "keel: storing task outcome failed; the lease will expire and the task be rescued"
	case !end.Applied && ex.cancelled.Load():
		// The cancel recorded the attempt as cancelled.
		level, msg = slog.LevelInfo, "keel: task cancelled while running"
	case !end.Applied:
		level, msg = slog.LevelWarn, "keel: task outcome rejected: lease lost or task cancelled"
	case end.State == driver.StateDead:
		level, msg = slog.LevelError, "keel: task dead-lettered"
	case end.Kind == KindSnoozed:
		msg = "keel: task snoozed"
	case end.Kind == KindReleased:
		msg = "keel: task released on shutdown"
	case end.State == driver.StatePending:
		level, msg = slog.LevelWarn, "keel: task attempt failed, will retry"
	default:
		msg = "keel: task succeeded"
	}
	ctx := context.Background()
	if !log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.Int64(logevent.TaskID, row.ID), slog.String(logevent.Type, row.Type), slog.String(logevent.Queue, row.Queue),
		slog.Int(logevent.Attempt, row.Attempt), slog.String(logevent.Node, e.cfg.Node),
		slog.Int64(logevent.DurationMS, dur.Milliseconds()), slog.String(logevent.Outcome, end.Kind),
		slog.String(logevent.State, string(end.State)),
	}
	switch {
	case err != nil:
		attrs = append(attrs, slog.String(logevent.Error, err.Error()))
	case end.Error != "":
		attrs = append(attrs, slog.String(logevent.Error, end.Error))
	}
	if end.State == driver.StatePending && !t.RunAt.IsZero() {
		attrs = append(attrs, slog.Time("run_at", t.RunAt))
	}
	if id := logevent.TraceIDFromMeta(row.Meta); id != "" {
		attrs = append(attrs, slog.String(logevent.TraceID, id))
	}
	log.LogAttrs(ctx, level, msg, attrs...)
}

// observeRescue reports a task the rescuer took back from a vanished
// worker (the rescuer logs it).
func (e *Engine) observeRescue(row *driver.TaskRow) {
	if o := e.cfg.Observer; o != nil {
		o.Rescued(Rescue{TaskID: row.ID, Queue: row.Queue, Type: row.Type, Attempt: row.Attempt, State: row.State})
	}
}
