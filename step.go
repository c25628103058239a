package keel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
)

// ErrStepsTooLarge: a step's result would take its task's stored step
// results past MaxStepsBytes; nothing was stored.
var ErrStepsTooLarge = engine.ErrStepsTooLarge

// MaxStepsBytes bounds the JSON results of one task's steps, summed
// (1 MiB, like a payload's default limit).
const MaxStepsBytes = driver.MaxStepsBytes

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
// MaxStepsBytes in all (ErrStepsTooLarge). T must survive a JSON round
// trip: a replayed step returns the decoded value, not the one fn built.
//
// A step is effectively-once only for what it stores: fn's side effects
// happen again if the worker dies after they happened and before the step
// was stored, so they should be idempotent (or written with CompleteTx in
// the final step). Outside a handler Step returns ErrNotInHandler; a bad
// name returns an ErrInvalid error; fn is not called in either case.
func Step[T any](ctx context.Context, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if !engine.InHandler(ctx) {
		return zero, ErrNotInHandler
	}
	if err := driver.ValidateStepName(name); err != nil {
		return zero, invalid("step %q: %v", name, err)
	}
	if fn == nil {
		return zero, invalid("step %q: nil function", name)
	}
	stored, found, _, err := engine.StoredStep(ctx, name)
	if err != nil {
		return zero, unavailable(ctx, err)
	}
	if found {
		var v T
		if err := json.Unmarshal(stored, &v); err != nil {
			return zero, fmt.Errorf("step %q: decode its stored result into %T: %w", name, v, err)
		}
		return v, nil
	}
	v, err := fn(ctx)
	if err != nil {
		return v, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return zero, invalid("step %q: result cannot be encoded as JSON: %v", name, err)
	}
	if _, err := engine.SaveStep(ctx, name, b); err != nil {
		return zero, unavailable(ctx, err)
	}
	return v, nil
}
