package engine

import (
	"time"

	"github.com/keelq/keel/driver"
)

// Observer is told what the engine does, for metrics. Its methods run on
// the engine's goroutines (claim loop, completer, rescuer): they must be
// quick and must not block. Config.Observer may be nil: nothing is then
// built or called.
type Observer interface {
	// Started: an attempt of a claimed task begins.
	Started(AttemptStart)
	// Finished: an attempt's outcome was stored, or rejected.
	Finished(AttemptEnd)
	// Rescued: the rescuer ended an attempt whose lease expired (its worker
	// vanished); the attempt's outcome is lease_expired.
	Rescued(Rescue)
}

// AttemptStart describes an attempt as it begins.
type AttemptStart struct {
	Queue, Type string
	Attempt     int
	// PickupLatency is how long the task waited ready: from the later of
	// its run_at and its creation to the attempt's start (0 if negative).
	PickupLatency time.Duration
}

// Kinds of attempt ends, the outcome label of keel_attempts_total. A
// released attempt (shutdown) is no outcome: the attempt is refunded.
const (
	KindSucceeded = "succeeded"
	KindSnoozed   = "snoozed"
	KindReleased  = "released"
	// A failed attempt's kind is its driver.Outcome: error, timeout,
	// panic, permanent, snoozed (past MaxSnoozes) or lease_expired.
)

// AttemptEnd describes an attempt whose outcome the engine stored.
type AttemptEnd struct {
	TaskID      int64
	Queue, Type string
	Attempt     int
	Node        string
	Duration    time.Duration
	// CommitLatency is the time from the handler's return (or the attempt
	// being given up on) to the completer's answer: the outcome stored,
	// rejected, or given up on (Err).
	CommitLatency time.Duration
	// Kind is succeeded, released, snoozed, or the failed attempt's
	// outcome (error, timeout, panic, permanent; snoozed when a snooze
	// past the maximum dead-lettered the task).
	Kind string
	// State is the task's next state: succeeded, pending or dead.
	State driver.State
	// Error is the failed attempt's error text, "" otherwise.
	Error string
	// Applied is false when the outcome was not stored: the task was
	// cancelled or its lease lost meanwhile (or the write failed, Err).
	// An attempt not applied is counted by whoever changed the task.
	Applied bool
	Err     error
}

// Rescue describes one task the rescuer took back from a vanished worker.
type Rescue struct {
	TaskID      int64
	Queue, Type string
	Attempt     int
	// State is the task's next state: pending, or dead on its last attempt.
	State driver.State
}

// observeStart reports the start of an attempt of row, claimed at claimed
// (the monotonic clock; a prefetched task starts later).
func (e *Engine) observeStart(row *driver.TaskRow, claimed time.Time) {
	o := e.cfg.Observer
	if o == nil {
		return
	}
	ready := row.RunAt
	if row.CreatedAt.After(ready) {
		ready = row.CreatedAt
	}
	o.Started(AttemptStart{Queue: row.Queue, Type: row.Type, Attempt: row.Attempt,
		PickupLatency: max(0, row.AttemptedAt.Add(time.Since(claimed)).Sub(ready))})
}
