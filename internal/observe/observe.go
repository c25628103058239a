// Package observe passes a client's task events on to its observers: the
// enqueues the client reports, the engine's attempts and rescues, and the
// cancels the client makes (which it also logs).
package observe

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/logevent"
)

// Event is keel.Event with the type of its kind a parameter, K: the two
// structs have the same fields in the same order, so keel converts one to
// the other (keel.Event(e)).
type Event[K ~string] struct {
	Kind          K
	TaskID        int64
	Queue         string
	Type          string
	Attempt       int
	Duplicate     bool
	PickupLatency time.Duration
	Duration      time.Duration
	CommitLatency time.Duration
	Outcome       driver.Outcome
	State         driver.State
	Error         string
	Schedule      string
	BatchID       int64
}

// The kinds of the events a Hub makes itself (keel's EventStarted,
// EventAttempt, EventRescued and EventCancelled).
const (
	KindStarted   = "started"
	KindAttempt   = "attempt"
	KindRescued   = "rescued"
	KindCancelled = "cancelled"
)

// Hub holds a client's observers. Reading them takes one atomic load, so
// an event nobody observes costs next to nothing. A Hub is also the
// engine's observer: it passes the attempts and rescues on.
type Hub[K ~string] struct {
	mu   sync.Mutex // serializes Add
	list atomic.Pointer[[]func(Event[K])]
}

var _ engine.Observer = (*Hub[string])(nil)

// Add adds o to the observers told about the events from now on.
func (h *Hub[K]) Add(o func(Event[K])) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := append(slices.Clone(h.load()), o)
	h.list.Store(&list)
}

func (h *Hub[K]) load() []func(Event[K]) {
	if p := h.list.Load(); p != nil {
		return *p
	}
	return nil
}

// Active reports whether anyone observes.
func (h *Hub[K]) Active() bool { return len(h.load()) > 0 }

// Emit tells every observer about ev.
func (h *Hub[K]) Emit(ev Event[K]) {
	for _, o := range h.load() {
		o(ev)
	}
}

// Started reports an attempt's start.
func (h *Hub[K]) Started(s engine.AttemptStart) {
	if !h.Active() {
		return
	}
	h.Emit(Event[K]{Kind: KindStarted, Queue: s.Queue, Type: s.Type, Attempt: s.Attempt, PickupLatency: s.PickupLatency})
}

// Finished reports an attempt's end when its outcome was stored: an
// outcome the database rejected is reported by whoever changed the task.
func (h *Hub[K]) Finished(f engine.AttemptEnd) {
	if !f.Applied || !h.Active() {
		return
	}
	h.Emit(Event[K]{Kind: KindAttempt, TaskID: f.TaskID, Queue: f.Queue, Type: f.Type, Attempt: f.Attempt,
		Duration: f.Duration, CommitLatency: f.CommitLatency, Outcome: driver.Outcome(f.Kind), State: f.State, Error: f.Error})
}

// Rescued reports an attempt the rescuer ended.
func (h *Hub[K]) Rescued(r engine.Rescue) {
	if !h.Active() {
		return
	}
	h.Emit(Event[K]{Kind: KindRescued, TaskID: r.TaskID, Queue: r.Queue, Type: r.Type, Attempt: r.Attempt,
		Outcome: driver.OutcomeLeaseExpired, State: r.State})
}

// Cancelled reports a task the client on node cancelled: to the
// observers, and as a log record at INFO.
func (h *Hub[K]) Cancelled(ctx context.Context, log *slog.Logger, node string, row *driver.TaskRow) {
	h.Emit(Event[K]{Kind: KindCancelled, TaskID: row.ID, Queue: row.Queue, Type: row.Type, Attempt: row.Attempt,
		State: row.State})
	if !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{
		slog.Int64(logevent.TaskID, row.ID), slog.String(logevent.Type, row.Type), slog.String(logevent.Queue, row.Queue),
		slog.Int(logevent.Attempt, row.Attempt), slog.String(logevent.Node, node),
		slog.String(logevent.State, string(row.State)),
	}
	if id := logevent.TraceIDFromMeta(row.Meta); id != "" {
		attrs = append(attrs, slog.String(logevent.TraceID, id))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "keel: task cancelled", attrs...)
}
