package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/completer"
	"github.com/keelq/keel/internal/logevent"
)

// execution is one attempt of a task running in this process.
type execution struct {
	e      *Engine
	row    *driver.TaskRow
	ctx    context.Context
	cancel context.CancelCauseFunc
	// claimed is when the claim returned the task (the monotonic clock);
	// held is set while it waits for a slot (prefetch, guarded by e.mu);
	// started once its handler was launched (read after the outcome).
	claimed time.Time
	held    bool
	started bool
	// completedTx is set when the handler committed its own completion.
	completedTx bool
	// cancelled is set when this process cancelled the task (Cancel):
	// its outcome is then rejected as expected.
	cancelled atomic.Bool
	// ended is set by the first finished of the execution (see finished).
	ended atomic.Bool
	// steps are the task's stored durable steps (keel.Step).
	steps steps
	// The attempt's outcome, for the completer (LeaseExpiresAt, Done).
	p   *producer
	t   driver.Transition
	dur time.Duration
	// returned is when the outcome was handed to the completer (the
	// monotonic clock: keel_outcome_commit_seconds).
	returned time.Time
}

// LeaseExpiresAt implements completer.Owner.
func (ex *execution) LeaseExpiresAt() (time.Time, bool) {
	return ex.e.heartbeat.LeaseExpiresAt(ex.row.ID, ex.row.LeaseExpiresAt), true
}

// Done implements completer.Owner.
func (ex *execution) Done(applied bool, err error) {
	ex.e.finished(ex.p, ex, ex.t, ex.dur, applied, err)
}

type execKey struct{}

// startExecution starts an attempt of row, just claimed, in one of p's
// slots.
func (e *Engine) startExecution(p *producer, row *driver.TaskRow) {
	e.launch(e.admit(p, row, false))
}

// admit registers an attempt of row, just claimed, as this process's: the
// heartbeat renews its lease from now on, Stop waits for its outcome. It
// takes one of p's slots, or with hold waits in p.held for one (prefetch).
func (e *Engine) admit(p *producer, row *driver.TaskRow, hold bool) *execution {
	ctx, cancel := context.WithCancelCause(e.workCtx)
	ex := &execution{e: e, row: row, ctx: ctx, cancel: cancel, claimed: time.Now(), p: p}
	e.mu.Lock()
	if hold {
		ex.held = true
		p.held = append(p.held, ex)
	} else {
		p.active++
	}
	e.running[row.ID] = ex
	e.mu.Unlock()
	e.inflight.Add(1)
	return ex
}

// launch runs the handler of ex, which holds a slot, on a goroutine of its
// own.
func (e *Engine) launch(ex *execution) {
	ex.started = true
	e.observeStart(ex.row, ex.claimed)
	go e.execute(ex.p, context.WithValue(ex.ctx, execKey{}, ex), ex)
}

// result is what one run of a handler produced.
type result struct {
	value json.RawMessage
	err   error
	stack string
	panic bool
}

// execute runs one attempt and hands its outcome to the completer. The
// handler runs on this goroutine; if its context ends (timeout, stop, lost
// lease) and it does not return within TimeoutGrace, a timer reports the
// attempt instead, the handler is counted as a runaway until it returns,
// and its late return is ignored.
func (e *Engine) execute(p *producer, ctx context.Context, ex *execution) {
	row := ex.row
	start := e.cfg.Now()
	ctx, span := e.startAttemptSpan(ctx, row)
	var reported atomic.Bool
	report := func(tctx context.Context, res result) {
		if !reported.CompareAndSwap(false, true) {
			return
		}
		if res.err != nil && tctx != nil && errors.Is(context.Cause(tctx), ErrTimeout) {
			res.err = fmt.Errorf("%w after %v: %v", ErrTimeout, row.Timeout, res.err)
		}
		end := e.cfg.Now()
		t := e.decide(ctx, row, res, start, end)
		endAttemptSpan(span, t, res.err)
		// The brake judges the outcome now, before the slot frees, so that
		// a brake it opens holds the next claim back.
		e.mu.Lock()
		judged := t
		if ex.completedTx { // the handler's own transaction stored the success
			judged.State = driver.StateSucceeded
		}
		e.mu.Unlock()
		// An attempt keel cut short (a cancel, a stop, a lost lease) says
		// nothing of the downstream.
		probe := e.judgeAttempt(row, judged, !ex.cancelled.Load() && ctx.Err() == nil)
		e.mu.Lock()
		p.active--
		p.finishing++
		e.mu.Unlock()
		p.startHeld() // a prefetched task takes the slot at once
		p.signalFreed()
		if probe {
			p.wake() // the trickle has room: a drained queue would wait for the poll
		}
		ex.p, ex.t, ex.dur, ex.returned = p, t, end.Sub(start), time.Now()
		e.completer.Add(completer.Request{Transition: t, Owner: ex})
	}
	if ctx.Err() != nil {
		// Cancelled, stopped or lost while it waited for a slot: the
		// handler does not run.
		report(nil, result{err: context.Cause(ctx)})
		return
	}
	h := e.cfg.Handlers[row.Type]
	if h == nil {
		report(nil, result{err: fmt.Errorf("no handler for task type %q on node %s", row.Type, e.cfg.Node)})
		return
	}
	tctx, cancelT := context.WithTimeoutCause(ctx, row.Timeout, ErrTimeout)
	defer cancelT()
	var grace atomic.Pointer[time.Timer]
	var runaway atomic.Bool
	stopWatch := context.AfterFunc(tctx, func() {
		grace.Store(time.AfterFunc(e.cfg.TimeoutGrace, func() {
			cause := context.Cause(tctx)
			runaway.Store(true)
			e.runawayStarted(row, cause)
			report(tctx, result{err: fmt.Errorf("handler did not return within %v after its context ended: %w",
				e.cfg.TimeoutGrace, cause)})
		}))
	})
	res := runHandler(tctx, h, row)
	if !stopWatch() {
		// The context ended while the handler ran: the grace timer may be
		// armed (or about to be); whichever reports first wins.
		for i := 0; i < 1000 && grace.Load() == nil; i++ {
			runtime.Gosched()
		}
		if t := grace.Load(); t != nil && !t.Stop() {
			// The timer fired: wait for its callback to mark the runaway,
			// so that its end is counted exactly once.
			for !runaway.Load() {
				runtime.Gosched()
			}
		}
	}
	if runaway.Load() {
		e.runawayEnded(row, start)
	}
	report(tctx, res)
}

func runHandler(ctx context.Context, h Handler, row *driver.TaskRow) (res result) {
	defer func() {
		if p := recover(); p != nil {
			res = result{err: fmt.Errorf("panic: %v", p), stack: string(debug.Stack()), panic: true}
		}
	}()
	value, err := h(ctx, row)
	return result{value: value, err: err}
}

// finished runs once an attempt's outcome is stored (or rejected).
func (e *Engine) finished(p *producer, ex *execution, t driver.Transition, dur time.Duration, applied bool, err error) {
	row := ex.row
	if !ex.ended.CompareAndSwap(false, true) {
		// An outcome handed to the completer twice: once is all the
		// accounting (slots, Stop's wait) can take. The write is fenced,
		// so the database is right either way.
		e.cfg.Logger.Error("keel: an attempt's outcome was stored twice; the second is ignored (a defect: please report it)",
			logevent.TaskID, row.ID, logevent.Type, row.Type, logevent.Queue, row.Queue, "held", !ex.started)
		return
	}
	e.mu.Lock()
	completedTx := ex.completedTx
	if e.running[row.ID] == ex { // a newer attempt of the task may have replaced this one
		delete(e.running, row.ID)
	}
	p.finishing--
	e.mu.Unlock()
	ex.cancel(nil)
	if ex.started {
		e.attemptEnded(ex, t, dur, applied, err, completedTx)
	} else {
		e.heldReleased(ex, applied, err)
	}
	if applied && t.State == driver.StatePending {
		e.Wake(row.Queue, t.RunAt)
	} else if applied && row.Sequence != "" && !e.notifies {
		// Its finish may have released the next member of its sequence.
		e.WakeQueue(row.Queue)
	}
	if e.typeCapped(row.Type, row.Queue) {
		// Room under the type's cap: its tasks may wait in any queue,
		// which a drained worker would not look for until the poll.
		e.WakeQueue("")
	}
	p.signalFreed()
	e.inflight.Done()
}
