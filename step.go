package keel

import (
	"context"
	"encoding/json"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/steps"
)

// ErrStepsTooLarge: a step's result would take its task's stored step
// results past MaxStepsBytes; nothing was stored.
var ErrStepsTooLarge = engine.ErrStepsTooLarge

// MaxStepsBytes bounds the JSON results of one task's steps, summed
// (1 MiB, like a payload's default limit).
const MaxStepsBytes = driver.MaxStepsBytes

// MaxStepDepth is the deepest nesting a step's result may have (29
// levels): results are stored two levels down in the task's steps, and
// MariaDB stores JSON nested at most 31 levels deep, as a payload may be.
const MaxStepDepth = driver.MaxStepDepth

// MaxStepName is the longest step name, in bytes (200).
const MaxStepName = driver.MaxStepName

// Step runs one durable step of a task: a part of a long handler whose
// success is recorded with the task, so that a later attempt (a retry, a
// rescue after the worker died, a manual requeue) skips it.
//
// Called from a handler with the handler's ctx, Step looks for a stored
// result of step name. If the task has one, Step decodes it into T and
// returns it without calling fn. Otherwise it calls fn; when fn succeeds,
// its result is stored as JSON with the task, then returned; when fn fails,
// its error is returned and nothing is stored, so the next attempt runs fn
// again.
//
// The store is fenced like a completion: it applies only while the task is
// still running under this worker's claim. If the lease was lost (the task
// was rescued and taken by another worker, or cancelled), Step returns an
// error wrapping ErrLeaseLost: return it from the handler. Nothing else is
// cancelled by it.
//
// A step name is unique within its task: 1 to MaxStepName bytes of UTF-8
// without control characters, double quotes or backslashes. Calling the
// same name twice returns the stored result the second time, within one
// attempt as across attempts. A task's step results may take at most
// MaxStepsBytes in all (ErrStepsTooLarge). A result must be storable as a
// payload is, alike on every database: no NUL character, no lone UTF-16
// surrogate, no object key twice, nesting at most MaxStepDepth, numbers
// within PostgreSQL's numeric; else Step returns an ErrInvalid error and
// stores nothing. T must survive a JSON round
// trip: a replayed step returns the decoded value, not the one fn built.
//
// A step is effectively-once only for what it stores: fn's side effects
// happen again if the worker dies after they happened and before the step
// was stored, so they should be idempotent (or written with CompleteTx in
// the final step). Outside a handler Step returns ErrNotInHandler; a bad
// name returns an ErrInvalid error; fn is not called in either case.
func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	if !engine.InHandler(ctx) {
		return *new(T), ErrNotInHandler
	}
	return steps.Run(ctx, steps.Handler, name, fn)
}

// SaveStep stores result as step name of task id for a worker outside this
// process that holds the task's claim with fencing token fence: an HTTP
// target, through POST /v1/tasks/{id}/steps, with the fence keel sent it
// in the Keel-Fence header. It applies only while the task is running
// with that fence; otherwise nothing is stored and the error wraps
// ErrNotFound (no such task), ErrWrongState (the task is not running) or
// ErrLeaseLost (it runs under a newer claim, or its claim ended meanwhile).
// A step of the same name is replaced. name and result follow Step's
// rules (result is JSON; a task's results take at most MaxStepsBytes,
// else ErrStepsTooLarge). It returns the task with its steps.
func (c *Client) SaveStep(ctx context.Context, id, fence int64, name string, result json.RawMessage) (*TaskInfo, error) {
	if err := steps.Save(ctx, c.drv, id, fence, name, result, c.cfg.Now()); err != nil {
		return nil, err
	}
	return c.Get(ctx, id)
}
