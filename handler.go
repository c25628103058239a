package keel

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/enqueue"
)

// Handlers maps task types to their handlers and per-type defaults.
// Register with Handle; pass it as Config.Handlers.
type Handlers struct {
	m map[string]*handlerEntry
}

// NewHandlers returns an empty registry.
func NewHandlers() *Handlers { return &Handlers{m: map[string]*handlerEntry{}} }

type handlerEntry struct {
	defaults options
	// run decodes the payload, calls the user's function and returns the
	// result it set.
	run engine.Handler
}

// HandlerFunc is a typed handler: it receives the task with its payload
// decoded into T. Return nil to succeed, an error to retry with backoff,
// Permanent(err) to dead-letter now, RetryAfter(err, d) to retry after d, or
// Snooze(d) to run again later without using an attempt.
type HandlerFunc[T any] func(ctx context.Context, task *Task[T]) error

// Handle registers fn for taskType. opts become the type's defaults
// (Queue, Priority, MaxAttempts, Timeout, Backoff, MaxSnoozes); Enqueue
// options override them. The client stores the defaults (all but
// MaxSnoozes) in the database before its first enqueue or at Start, so
// that other clients enqueuing the type apply them too (see Config.Types).
// It panics on an invalid name, a duplicate registration or a
// per-task option (UniqueBy, IdempotencyKey, RunAt, Delay), like
// http.HandleFunc does for bad patterns: these are programming errors.
func Handle[T any](h *Handlers, taskType string, fn HandlerFunc[T], opts ...Option) {
	if fn == nil {
		panic(fmt.Sprintf("keel: Handle: nil handler for %q", taskType))
	}
	defaults := h.check("Handle", taskType, opts)
	h.m[taskType] = &handlerEntry{defaults: defaults, run: func(ctx context.Context, row *driver.TaskRow) (json.RawMessage, error) {
		task := &Task[T]{
			ID: row.ID, Type: row.Type, Queue: row.Queue, Priority: row.Priority, Attempt: row.Attempt,
			MaxAttempts: row.MaxAttempts, Snoozes: row.Snoozes, Delivery: row.Fence, CreatedAt: row.CreatedAt, Payload: row.Payload,
		}
		if err := json.Unmarshal(row.Payload, &task.Args); err != nil {
			return nil, Permanent(fmt.Errorf("decode payload into %T: %w", task.Args, err))
		}
		err := fn(ctx, task)
		return task.result, err
	}}
}

// Declare registers taskType with its defaults (Queue, Priority,
// MaxAttempts, Timeout, Backoff) but no handler: this client enqueues it
// with those defaults, stores them like Handle does, and another process
// works it. Workers of this client never claim a declared type's tasks,
// even on a queue they serve: they stay pending for a process with a
// handler. It panics like Handle on an invalid name, a duplicate
// registration or a per-task option.
func Declare(h *Handlers, taskType string, opts ...Option) {
	h.m[taskType] = &handlerEntry{defaults: h.check("Declare", taskType, opts)}
}

// check validates a registration and returns the type's defaults; it
// panics with what is wrong.
func (h *Handlers) check(fn, taskType string, opts []Option) options {
	_, dup := h.m[taskType]
	return enqueue.MustRegister(fn, taskType, dup, opts)
}

// handled reports whether any registered type has a handler.
func (h *Handlers) handled() bool {
	for _, e := range h.m {
		if e.run != nil {
			return true
		}
	}
	return false
}

// Types returns the registered task types, declared ones included.
func (h *Handlers) Types() []string {
	return slices.AppendSeq(make([]string, 0, len(h.m)), maps.Keys(h.m))
}
