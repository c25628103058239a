package keeltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/keelq/keel"
)

// Kind classifies how a handler's attempt ended, the way a worker would.
type Kind string

// The outcomes of one attempt.
const (
	// KindSucceeded: the handler returned nil.
	KindSucceeded Kind = "succeeded"
	// KindRetry: the handler returned an ordinary error or a RetryAfter
	// error; the task is retried if attempts remain.
	KindRetry Kind = "retry"
	// KindPermanent: the handler returned keel.Permanent(err); the task is
	// dead-lettered at once.
	KindPermanent Kind = "permanent"
	// KindSnooze: the handler returned keel.Snooze(d); the task runs again
	// after d without using an attempt.
	KindSnooze Kind = "snooze"
	// KindPanic: the handler panicked; the panic was recovered and is
	// retried like an error.
	KindPanic Kind = "panic"
	// KindTimeout: the handler failed after the attempt's timeout ended its
	// context (or did not return in the grace period); retried like an error.
	KindTimeout Kind = "timeout"
	// KindInvalid: the args could not be encoded as a JSON payload, so
	// Enqueue would have rejected them (Err wraps keel.ErrInvalid); the
	// handler did not run.
	KindInvalid Kind = "invalid"
)

// Outcome is the result of running a handler once with Run.
type Outcome[T any] struct {
	// Kind classifies the attempt.
	Kind Kind
	// Err is what the handler returned (for KindPanic, "panic: <value>").
	Err error
	// Result is what the handler stored with Task.SetResult, or nil (also
	// nil when the handler never returned). A worker keeps it only when the
	// attempt succeeds.
	Result json.RawMessage
	// Delay is the delay asked for by keel.RetryAfter (KindRetry) or
	// keel.Snooze (KindSnooze); 0 otherwise (a retry then uses the backoff).
	Delay time.Duration
	// Stack is the panicking goroutine's stack for KindPanic.
	Stack string
	// State is the state a worker would move the task to: succeeded,
	// pending (retry or snooze) or dead (permanent, or a failure on the last
	// attempt).
	State keel.State
	// Task is the synthetic task the handler received.
	Task *keel.Task[T]
}

// String summarises the outcome for test failure messages.
func (o *Outcome[T]) String() string {
	if o.Err == nil {
		return fmt.Sprintf("%s (next state %s)", o.Kind, o.State)
	}
	return fmt.Sprintf("%s (next state %s): %v", o.Kind, o.State, o.Err)
}

// Option sets a property of the synthetic task Run builds.
type Option func(*runConfig)

type runConfig struct {
	id          int64
	taskType    string
	queue       string
	priority    int
	attempt     int
	maxAttempts int
	timeout     time.Duration
	grace       time.Duration
	createdAt   time.Time
}

// TaskID sets Task.ID. Default 1.
func TaskID(id int64) Option { return func(c *runConfig) { c.id = id } }

// Type sets Task.Type. Default "test".
func Type(taskType string) Option { return func(c *runConfig) { c.taskType = taskType } }

// Queue sets Task.Queue. Default keel.DefaultQueue.
func Queue(name string) Option { return func(c *runConfig) { c.queue = name } }

// Priority sets Task.Priority. Default 0.
func Priority(p int) Option { return func(c *runConfig) { c.priority = p } }

// Attempt sets Task.Attempt, 1 for a first run. Default 1.
func Attempt(n int) Option { return func(c *runConfig) { c.attempt = n } }

// MaxAttempts sets Task.MaxAttempts; a failure with Attempt >= MaxAttempts
// dead-letters. Default 4, like keel.Config.MaxAttempts.
func MaxAttempts(n int) Option { return func(c *runConfig) { c.maxAttempts = n } }

// Timeout bounds the attempt like keel.Timeout does: the handler's context
// ends after d. Default 60s, like keel.Config.Timeout.
func Timeout(d time.Duration) Option { return func(c *runConfig) { c.timeout = d } }

// TimeoutGrace is how long Run waits for a handler whose context ended
// before it gives up on it, like keel.Config.TimeoutGrace. Default 5s.
func TimeoutGrace(d time.Duration) Option { return func(c *runConfig) { c.grace = d } }

// CreatedAt sets Task.CreatedAt. Default the time Run is called.
func CreatedAt(t time.Time) Option { return func(c *runConfig) { c.createdAt = t } }

// Run calls handler once with a synthetic task holding args, without a
// database or worker, and classifies the outcome the way a worker would.
//
// args go through JSON like a real payload: they are encoded, then decoded
// into the task's Args, so a type that does not survive the round trip
// shows up here. A panic is recovered and reported as KindPanic.
//
// Handlers that call keel.CompleteTx get keel.ErrNotInHandler under Run:
// test those with a Client from NewClient.
func Run[T any](ctx context.Context, handler keel.HandlerFunc[T], args T, opts ...Option) *Outcome[T] {
	cfg := runConfig{
		id: 1, taskType: "test", queue: keel.DefaultQueue, attempt: 1, maxAttempts: 4,
		timeout: 60 * time.Second, grace: 5 * time.Second, createdAt: time.Now(),
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	task := &keel.Task[T]{
		ID: cfg.id, Type: cfg.taskType, Queue: cfg.queue, Priority: cfg.priority,
		Attempt: cfg.attempt, MaxAttempts: cfg.maxAttempts, Delivery: int64(cfg.attempt), CreatedAt: cfg.createdAt,
	}
	out := &Outcome[T]{Task: task}
	payload, err := json.Marshal(args)
	if err != nil {
		out.Kind, out.State = KindInvalid, keel.StatePending
		out.Err = fmt.Errorf("%w: args cannot be encoded as JSON: %v", keel.ErrInvalid, err)
		return out
	}
	task.Payload = payload
	if err := json.Unmarshal(payload, &task.Args); err != nil {
		// The worker dead-letters a payload that does not decode.
		out.Kind, out.State = KindPermanent, keel.StateDead
		out.Err = keel.Permanent(fmt.Errorf("decode payload into %T: %w", task.Args, err))
		return out
	}
	if handler == nil {
		out.Kind, out.State = KindInvalid, keel.StatePending
		out.Err = fmt.Errorf("%w: nil handler", keel.ErrInvalid)
		return out
	}
	if ctx == nil {
		ctx = context.Background()
	}

	tctx, cancel := context.WithTimeoutCause(ctx, cfg.timeout, errTimeout)
	defer cancel()
	type result struct {
		err   error
		stack string
		panic bool
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: fmt.Errorf("panic: %v", p), stack: string(debug.Stack()), panic: true}
			}
			done <- r
		}()
		r.err = handler(tctx, task)
	}()
	var r result
	returned := true
	select {
	case r = <-done:
	case <-tctx.Done():
		grace := time.NewTimer(cfg.grace)
		select {
		case r = <-done:
		case <-grace.C:
			returned = false
			r.err = fmt.Errorf("handler did not return within %v after its context ended: %w", cfg.grace, context.Cause(tctx))
		}
		grace.Stop()
	}
	timedOut := errors.Is(context.Cause(tctx), errTimeout)
	out.Err, out.Stack = r.err, r.stack
	if returned {
		// A handler still running may yet write its result: read it only
		// once the handler has returned.
		out.Result = task.Result()
	}
	classify(out, r.panic, timedOut, cfg)
	return out
}

// errTimeout is the cause Run cancels a handler's context with when its
// timeout passes.
var errTimeout = errors.New("keeltest: task timeout exceeded")

// classify sets Kind, Delay and State in the order the worker applies.
func classify[T any](out *Outcome[T], panicked, timedOut bool, cfg runConfig) {
	err := out.Err
	if err == nil {
		out.Kind, out.State = KindSucceeded, keel.StateSucceeded
		return
	}
	if d, ok := keel.SnoozeDelay(err); ok {
		out.Kind, out.State, out.Delay = KindSnooze, keel.StatePending, d
		return
	}
	switch {
	case panicked:
		out.Kind = KindPanic
	case timedOut:
		out.Kind = KindTimeout
	case keel.IsPermanent(err):
		out.Kind, out.State = KindPermanent, keel.StateDead
		return
	default:
		out.Kind = KindRetry
	}
	if cfg.attempt >= cfg.maxAttempts {
		out.State = keel.StateDead
		return
	}
	out.State = keel.StatePending
	if d, ok := keel.RetryDelay(err); ok {
		out.Delay = d
	}
}
