package keel

import (
	"context"
	"errors"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/outcome"
)

// Errors returned by keel. Test for them with errors.Is.
var (
	// ErrNotFound: no task with that id.
	ErrNotFound = driver.ErrNotFound
	// ErrIdempotencyConflict: the idempotency key is held by a task whose
	// payload (or type) differs.
	ErrIdempotencyConflict = driver.ErrIdempotencyConflict
	// ErrWrongState: the task is not in a state the operation applies to,
	// such as cancelling a succeeded task.
	ErrWrongState = driver.ErrWrongState
	// ErrUnavailable: the database could not be reached (connection
	// refused, reset or lost). Retry later; retry an enqueue with the same
	// idempotency key, since a connection lost during its commit leaves the
	// outcome unknown.
	ErrUnavailable = driver.ErrUnavailable
	// ErrInvalid wraps every rejected input: bad names, payloads, options and
	// configuration. Nothing is written when it is returned.
	ErrInvalid = kerr.ErrInvalid
	// ErrUnknownType: the task type has no handler and is not declared in
	// Config.Types.
	ErrUnknownType = kerr.ErrUnknownType
	// ErrPayloadTooLarge: the payload exceeds Config.MaxPayloadBytes.
	ErrPayloadTooLarge = kerr.ErrPayloadTooLarge
	// ErrLeaseLost: the task is no longer held by this worker (its lease
	// expired and another worker took it, or it was cancelled), so its
	// completion was rejected.
	ErrLeaseLost = engine.ErrLeaseLost
	// ErrNotInHandler: a handler-only call (CompleteTx, Step) was made outside a
	// handler's context.
	ErrNotInHandler = errors.New("keel: not called from a task handler")
	// ErrNotWorker: Start on a client without handlers, or Start twice.
	ErrNotWorker = errors.New("keel: client cannot start workers")
)

// invalid returns an ErrInvalid error; long string arguments are
// shortened, so an error never echoes a huge input.
func invalid(format string, args ...any) error { return kerr.Invalid(format, args...) }

// unavailable wraps a driver error that says the database could not be
// reached with ErrUnavailable; an error after ctx ended is the caller's,
// and is returned as it is (see kerr.Unavailable).
func unavailable(ctx context.Context, err error) error { return kerr.Unavailable(ctx, err) }

// Permanent marks err as not worth retrying: the task is dead-lettered at
// once, whatever attempts remain.
func Permanent(err error) error { return &outcome.Permanent{Err: err} }

// RetryAfter fails the attempt like err but retries after d instead of the
// backoff delay (if attempts remain).
func RetryAfter(err error, d time.Duration) error { return &outcome.RetryAfter{Err: err, Delay: d} }

// Snooze reschedules the task to run again after d without using an
// attempt and without recording an error.
func Snooze(d time.Duration) error { return &outcome.Snooze{Delay: d} }
