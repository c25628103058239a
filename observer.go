package keel

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/conv"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/known"
	"github.com/keelq/keel/internal/observe"
)

// An EventKind says what happened to a task in an Event.
type EventKind string

// The kinds of Event.
const (
	// EventEnqueued: Enqueue, EnqueueMany or their Tx twins inserted the
	// task, or found it already there (Event.Duplicate, an idempotency
	// hit). A Tx enqueue is reported at insert, before the caller commits.
	EventEnqueued EventKind = "enqueued"
	// EventStarted: a worker of this client claimed the task and starts an
	// attempt (Event.PickupLatency).
	EventStarted EventKind = "started"
	// EventAttempt: an attempt run by this client ended and its outcome was
	// stored (Event.Outcome, Event.State, Event.Duration). An outcome the
	// database rejected, because the task was cancelled or its lease lost
	// meanwhile, is not reported: whoever changed the task reports it.
	EventAttempt EventKind = "attempt"
	// EventRescued: this client's rescuer (it runs on the elected leader)
	// ended an attempt whose worker vanished: Event.Outcome is
	// lease_expired, Event.State pending or dead.
	EventRescued EventKind = "rescued"
	// EventCancelled: Cancel of this client cancelled the task.
	EventCancelled EventKind = "cancelled"
	// EventBatchFinished: this client, as the elected leader, finished a
	// batch (Event.BatchID) and enqueued its callbacks; Event.Outcome is
	// succeeded when every member succeeded, else failed. TaskID is 0.
	EventBatchFinished EventKind = "batch_finished"
)

// Outcome names how an attempt ended: the failures' outcomes are recorded
// in AttemptError.Outcome, and every outcome is reported in Event.Outcome.
type Outcome = driver.Outcome

// Attempt outcomes.
const (
	OutcomeError        = driver.OutcomeError
	OutcomePanic        = driver.OutcomePanic
	OutcomeTimeout      = driver.OutcomeTimeout
	OutcomePermanent    = driver.OutcomePermanent
	OutcomeLeaseExpired = driver.OutcomeLeaseExpired
	// OutcomeSnoozed: the handler snoozed. A snooze within the task's
	// MaxSnoozes leaves it pending and uses no attempt; the one past it
	// dead-letters the task.
	OutcomeSnoozed = driver.OutcomeSnoozed
	// OutcomeCancelled: Cancel ended the task while this attempt ran; the
	// history records the attempt with the cancel's time as its end.
	OutcomeCancelled = driver.OutcomeCancelled

	// OutcomeSucceeded: the handler returned nil.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeReleased: Stop cancelled the attempt and released the task
	// to pending; the attempt is refunded, so it is no attempt outcome.
	OutcomeReleased Outcome = "released"
	// OutcomeFailed: a batch finished with a member dead or cancelled
	// (EventBatchFinished).
	OutcomeFailed Outcome = "failed"
)

// Event is something that happened to a task in this process, as an
// Observer sees it. Fields a kind does not use are zero.
type Event struct {
	Kind    EventKind
	TaskID  int64 // 0 for EventStarted
	Queue   string
	Type    string
	Attempt int // the attempt's number (EventStarted, EventAttempt, EventRescued), or the attempts used
	// Duplicate: the enqueue found the task already there (EventEnqueued).
	Duplicate bool
	// PickupLatency is how long the task waited ready before the attempt
	// started: from the later of its run time and its creation
	// (EventStarted).
	PickupLatency time.Duration
	// Duration is the attempt's run time (EventAttempt).
	Duration time.Duration
	// CommitLatency is the time from the handler's return to its outcome
	// committed in the database (EventAttempt): until then a crash of
	// this process runs the task again.
	CommitLatency time.Duration
	// Outcome is the attempt's: succeeded, released, snoozed (also when a
	// snooze past MaxSnoozes dead-letters the task), error, timeout,
	// panic, permanent (EventAttempt) or lease_expired (EventRescued).
	Outcome Outcome
	// State is the task's state after the event.
	State State
	// Error is a failed attempt's error text.
	Error string
	// Schedule names the schedule whose tick (or trigger) enqueued the
	// task (EventEnqueued); "" for other enqueues.
	Schedule string
	// BatchID is the batch that finished (EventBatchFinished).
	BatchID int64
}

// An Observer is told about this client's task events, for metrics (see
// package github.com/keelq/keel/metrics). Observe runs on keel's own
// goroutines, claim loops and completer among them: it must be quick and
// must not block or call back into the client.
type Observer interface {
	Observe(Event)
}

// Observe adds o to the observers told about this client's events from
// now on; add it before Start and the first Enqueue to see every event.
// With no observer, events cost next to nothing.
func (c *Client) Observe(o Observer) {
	if o == nil {
		return
	}
	if r, ok := o.(known.Receiver); ok {
		r.KnownWork(c.knownWork())
	}
	c.obs.Add(func(ev observe.Event[EventKind]) { o.Observe(Event(ev)) })
}

// knownWork is what c is configured for: the queues it works, the types
// it handles or declares (with their queues), its schedules; keel's own
// types with keel's queue, which is not listed.
func (c *Client) knownWork() known.Work {
	var types []known.Declared
	for name, o := range c.types {
		if reservedType(name) {
			continue
		}
		h := c.cfg.Handlers.m[name]
		types = append(types, known.Declared{Name: name, Queue: o.Queue, Handled: h != nil && h.run != nil})
	}
	return known.Of(known.Client{Queues: slices.Collect(maps.Keys(c.cfg.Queues)), Keel: slices.Collect(maps.Keys(c.alerter.Handlers())),
		Types: types, Schedules: conv.Slice(c.schedules, func(s driver.ScheduleParams) string { return s.Name }),
		Reserved: ReservedQueue, Default: DefaultQueue})
}

// observers holds a client's observers, and passes the engine's events on
// to them (see engineObserver).
type observers struct{ observe.Hub[EventKind] }

func (o *observers) emit(ev Event) { o.Emit(observe.Event[EventKind](ev)) }

// active reports whether anyone observes.
func (o *observers) active() bool { return o.Active() }

// engineObserver passes the engine's events on to the client's observers.
type engineObserver struct{ *observers }

var _ engine.Observer = engineObserver{}

// cancelled reports a task this client cancelled: to the observers, and
// as a log record at INFO.
func (c *Client) cancelled(ctx context.Context, row *driver.TaskRow) {
	c.obs.Cancelled(ctx, c.cfg.Logger, c.cfg.Node, row)
}
