package engine

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/completer"
	"github.com/keelq/keel/internal/logevent"
)

// Prefetch: a queue's worker claims up to Config.QueuePrefetch tasks more
// than its free slots and holds them in the process, so that a slot freed
// by a finished handler starts the next task at once, without waiting for
// a claim. A held task is running in the database from its claim, under
// this node's lease, which the heartbeat renews like a running task's
// (Engine.runningIDs lists it); if the process dies, the rescuer takes it
// back like any other. Its attempt's timeout counts from its handler's
// start. Only tasks of types without a cluster-wide limit, in queues
// without one, are held: a limited claim takes free slots only.

// startHeld starts held tasks, in claim order, while the queue has free
// slots. A held task whose type was paused, limited or braked since its
// claim is released instead, and so is every held task of a queue paused
// or limited since. Nothing starts once the engine stops: Stop releases
// what is left.
func (p *producer) startHeld() {
	e := p.e
	var run, back []*execution
	e.mu.Lock()
	if len(p.held) == 0 || e.stopped {
		e.mu.Unlock()
		return
	}
	limit := e.queueLimit(p.name, p.limit)
	if limit == 0 || e.queueLimited(p.name) {
		back, p.held = p.held, nil
	}
	for len(p.held) > 0 && p.active < limit {
		ex := p.held[0]
		p.held[0] = nil
		p.held = p.held[1:]
		ex.held = false
		if !e.mayStartHeld(ex.row.Type) {
			back = append(back, ex)
			continue
		}
		p.active++
		run = append(run, ex)
	}
	if len(p.held) == 0 {
		p.held = nil // let the backing array go
	}
	p.givingBackLocked(back)
	e.mu.Unlock()
	for _, ex := range run {
		e.launch(ex)
	}
	for _, ex := range back {
		e.release(ex)
	}
}

// mayStartHeld reports whether a held task of taskType may start: its type
// is not paused, limited (a cluster-wide concurrency or rate it was not
// claimed under) or braked now.
func (e *Engine) mayStartHeld(taskType string) bool {
	if s, ok := e.settings.get().types[taskType]; ok && (s.Paused || s.Concurrency > 0 || s.Rate > 0) {
		return false
	}
	e.brakes.mu.Lock()
	_, braked := e.brakes.rows[taskType]
	e.brakes.mu.Unlock()
	return !braked
}

// releaseHeld releases every task p holds (Stop).
func (p *producer) releaseHeld() {
	e := p.e
	e.mu.Lock()
	back := p.held
	p.held = nil
	p.givingBackLocked(back)
	e.mu.Unlock()
	for _, ex := range back {
		e.release(ex)
	}
}

// givingBackLocked marks held tasks as being given back: no longer held,
// each counted in p.finishing until its release is written (e.mu held).
func (p *producer) givingBackLocked(back []*execution) {
	for _, ex := range back {
		ex.held = false
		p.finishing++
	}
}

// dropHeldLocked takes ex out of its queue's held tasks, if it is there,
// and reports whether it was; the caller then releases it (e.mu held).
func (e *Engine) dropHeldLocked(ex *execution) bool {
	if !ex.held {
		return false
	}
	p := ex.p
	p.held = slices.DeleteFunc(p.held, func(h *execution) bool { return h == ex })
	ex.held = false
	p.finishing++
	return true
}

// release gives a held task that never started back: pending again at
// the run_at it was claimed at (its place in line), its attempt refunded,
// written by the completer with the outcomes of finished attempts. The
// write is fenced like theirs: a task cancelled or rescued meanwhile is
// left as it is. The caller counted it in p.finishing.
func (e *Engine) release(ex *execution) {
	row := ex.row
	ex.t = driver.Transition{ID: row.ID, Fence: row.Fence, Task: row, State: driver.StatePending, RunAt: row.RunAt, Refund: true}
	ex.returned = time.Now()
	e.completer.Add(completer.Request{Transition: ex.t, Owner: ex})
}

// heldReleased logs the release of a held task that never started (no
// attempt was made: the Observer hears nothing).
func (e *Engine) heldReleased(ex *execution, applied bool, err error) {
	row, level, msg := ex.row, slog.LevelDebug, "keel: prefetched task released unstarted"
	switch {
	case err != nil:
		level, msg = slog.LevelError, "keel: releasing a prefetched task failed; the lease will expire and the task be rescued"
	case !applied:
		msg = "keel: prefetched task not released: cancelled or taken back meanwhile"
	}
	attrs := []slog.Attr{slog.Int64(logevent.TaskID, row.ID), slog.String(logevent.Type, row.Type),
		slog.String(logevent.Queue, row.Queue), slog.Int(logevent.Attempt, row.Attempt), slog.String(logevent.Node, e.cfg.Node)}
	if err != nil {
		attrs = append(attrs, slog.String(logevent.Error, err.Error()))
	}
	e.cfg.Logger.LogAttrs(context.Background(), level, msg, attrs...)
}
