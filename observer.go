package keel

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/known"
	"github.com/keelq/keel/internal/logevent"
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
	c.obs.mu.Lock()
	defer c.obs.mu.Unlock()
	list := append([]Observer(nil), c.obs.load()...)
	list = append(list, o)
	c.obs.list.Store(&list)
}

// knownWork is what c is configured for: the queues it works, the types
// it handles or declares (with their queues), its schedules; keel's own
// types with keel's queue, which is not listed.
func (c *Client) knownWork() known.Work {
	var w known.Work
	queues := map[string]bool{}
	for q := range c.cfg.Queues {
		queues[q] = true
	}
	for name := range c.alerter.Handlers() {
		// keel's own (alert deliveries, the drill): its metrics have
		// their own families.
		w.Types = append(w.Types, known.Type{Name: name, Queue: ReservedQueue})
	}
	for name, o := range c.types {
		if reservedType(name) {
			continue
		}
		t := known.Type{Name: name}
		switch {
		case o.Queue != nil:
			t.Queue = *o.Queue
		case c.cfg.Handlers.m[name] != nil && c.cfg.Handlers.m[name].run != nil:
			t.Queue = DefaultQueue // a handled type runs there unless told otherwise
		}
		if t.Queue != "" {
			queues[t.Queue] = true
		}
		w.Types = append(w.Types, t)
	}
	delete(queues, ReservedQueue)
	w.Queues = slices.Sorted(maps.Keys(queues))
	slices.SortFunc(w.Types, func(a, b known.Type) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range c.schedules {
		w.Schedules = append(w.Schedules, s.Name)
	}
	slices.Sort(w.Schedules)
	return w
}

// observers holds a client's observers; reading them takes one atomic
// load.
type observers struct {
	mu   sync.Mutex // serializes Observe
	list atomic.Pointer[[]Observer]
}

func (o *observers) load() []Observer {
	if p := o.list.Load(); p != nil {
		return *p
	}
	return nil
}

func (o *observers) emit(ev Event) {
	for _, x := range o.load() {
		x.Observe(ev)
	}
}

// active reports whether anyone observes.
func (o *observers) active() bool { return len(o.load()) > 0 }

// engineObserver passes the engine's events on to the client's observers.
type engineObserver struct{ o *observers }

var _ engine.Observer = engineObserver{}

func (e engineObserver) Started(s engine.AttemptStart) {
	if !e.o.active() {
		return
	}
	e.o.emit(Event{Kind: EventStarted, Queue: s.Queue, Type: s.Type, Attempt: s.Attempt, PickupLatency: s.PickupLatency})
}

func (e engineObserver) Finished(f engine.AttemptEnd) {
	if !f.Applied || !e.o.active() {
		return
	}
	e.o.emit(Event{Kind: EventAttempt, TaskID: f.TaskID, Queue: f.Queue, Type: f.Type, Attempt: f.Attempt,
		Duration: f.Duration, CommitLatency: f.CommitLatency, Outcome: Outcome(f.Kind), State: f.State, Error: f.Error})
}

func (e engineObserver) Rescued(r engine.Rescue) {
	if !e.o.active() {
		return
	}
	e.o.emit(Event{Kind: EventRescued, TaskID: r.TaskID, Queue: r.Queue, Type: r.Type, Attempt: r.Attempt,
		Outcome: driver.OutcomeLeaseExpired, State: r.State})
}

// cancelled reports a task this client cancelled: to the observers, and
// as a log record at INFO.
func (c *Client) cancelled(ctx context.Context, row *driver.TaskRow) {
	c.obs.emit(Event{Kind: EventCancelled, TaskID: row.ID, Queue: row.Queue, Type: row.Type, Attempt: row.Attempt,
		State: row.State})
	log := c.cfg.Logger
	if !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{
		slog.Int64(logevent.TaskID, row.ID), slog.String(logevent.Type, row.Type), slog.String(logevent.Queue, row.Queue),
		slog.Int(logevent.Attempt, row.Attempt), slog.String(logevent.Node, c.cfg.Node),
		slog.String(logevent.State, string(row.State)),
	}
	if id := logevent.TraceIDFromMeta(row.Meta); id != "" {
		attrs = append(attrs, slog.String(logevent.TraceID, id))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "keel: task cancelled", attrs...)
}
