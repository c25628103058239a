package keel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelq/keel/driver"
)

// Handlers maps task types to their handlers and per-type defaults.
// Register with Handle; pass it as Config.Handlers.
type Handlers struct {
	m map[string]*handlerEntry
}

// NewHandlers returns an empty registry.
func NewHandlers() *Handlers { return &Handlers{m: map[string]*handlerEntry{}} }

type handlerEntry struct {
	typ      string
	defaults options
	// run decodes the payload, calls the user's function and returns the
	// result it set.
	run func(ctx context.Context, row *driver.TaskRow) (json.RawMessage, error)
}

// HandlerFunc is a typed handler: it receives the task with its payload
// decoded into T. Return nil to succeed, an error to retry with backoff,
// Permanent(err) to dead-letter now, RetryAfter(err, d) to retry after d, or
// Snooze(d) to run again later without using an attempt.
type HandlerFunc[T any] func(ctx context.Context, task *Task[T]) error

// Handle registers fn for taskType. opts become the type's defaults
// (Queue, Priority, MaxAttempts, Timeout, Backoff); Enqueue options override
// them. It panics on an invalid name, a duplicate registration or a
// per-task option (UniqueBy, IdempotencyKey, RunAt, Delay), like
// http.HandleFunc does for bad patterns: these are programming errors.
func Handle[T any](h *Handlers, taskType string, fn HandlerFunc[T], opts ...Option) {
	if !validName(taskType) {
		panic(fmt.Sprintf("keel: Handle: invalid task type %q", taskType))
	}
	if _, dup := h.m[taskType]; dup {
		panic(fmt.Sprintf("keel: Handle: task type %q registered twice", taskType))
	}
	if fn == nil {
		panic(fmt.Sprintf("keel: Handle: nil handler for %q", taskType))
	}
	defaults := options{}.merge(opts)
	if defaults.uniqueBy != nil || defaults.idemKey != nil || defaults.runAt != nil || defaults.delay != nil || defaults.meta != nil {
		panic(fmt.Sprintf("keel: Handle(%q): UniqueBy, IdempotencyKey, RunAt, Delay and Meta apply to single tasks only", taskType))
	}
	if err := defaults.validate(); err != nil {
		panic(fmt.Sprintf("keel: Handle(%q): %v", taskType, err))
	}
	h.m[taskType] = &handlerEntry{typ: taskType, defaults: defaults, run: func(ctx context.Context, row *driver.TaskRow) (json.RawMessage, error) {
		task := &Task[T]{
			ID: row.ID, Type: row.Type, Queue: row.Queue, Priority: row.Priority, Attempt: row.Attempt,
			MaxAttempts: row.MaxAttempts, CreatedAt: row.CreatedAt, Payload: row.Payload,
		}
		if err := json.Unmarshal(row.Payload, &task.Args); err != nil {
			return nil, Permanent(fmt.Errorf("decode payload into %T: %w", task.Args, err))
		}
		err := fn(ctx, task)
		return task.result, err
	}}
}

// Types returns the registered task types.
func (h *Handlers) Types() []string {
	out := make([]string, 0, len(h.m))
	for t := range h.m {
		out = append(out, t)
	}
	return out
}
