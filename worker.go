package keel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/completer"
	"github.com/keelq/keel/internal/heartbeat"
	"github.com/keelq/keel/internal/leader"
	"github.com/keelq/keel/internal/notify"
	"github.com/keelq/keel/internal/rescuer"
)

// Causes with which keel cancels a handler's context; a handler can read
// them with context.Cause.
var (
	errTimeout   = errors.New("keel: task timeout exceeded")
	errStopping  = errors.New("keel: worker stopping")
	errCancelled = errors.New("keel: task cancelled")
)

// Start runs the workers of every configured queue, the batched completer
// and heartbeat, the node registry and the leader-elected rescuer. It
// returns at once; call Stop to end them. ctx carries values only: cancel
// work with Stop.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return fmt.Errorf("%w: already started", ErrNotWorker)
	}
	if !c.cfg.Handlers.handled() {
		return fmt.Errorf("%w: no handlers registered", ErrNotWorker)
	}
	c.started = true
	c.workCtx, c.cancelWork = context.WithCancelCause(context.WithoutCancel(ctx))
	log := c.cfg.Logger
	c.completer = completer.New(completer.Config{Driver: c.drv, Owner: c.cfg.Node, Now: c.cfg.Now, Logger: log})
	c.heartbeat = heartbeat.New(heartbeat.Config{
		Driver: c.drv, Owner: c.cfg.Node, Interval: c.cfg.HeartbeatInterval, LeaseTTL: c.cfg.LeaseTTL,
		Now: c.cfg.Now, Logger: log, Running: c.runningIDs, Lost: c.leaseLost,
	})
	c.elector = leader.New(leader.Config{Driver: c.drv, Owner: c.cfg.Node, TTL: c.cfg.LeaseTTL, Now: c.cfg.Now, Logger: log, OnLead: func() { c.rescuer.Kick() }})
	c.rescuer = rescuer.New(rescuer.Config{
		Driver: c.drv, Node: c.cfg.Node, Interval: c.cfg.RescueInterval, Now: c.cfg.Now, Logger: log,
		Backoff: c.backoff, Leading: c.elector.Leading,
		Rescued: func(rows []driver.TaskRow) {
			for _, r := range rows {
				c.wake(r.Queue, r.RunAt)
			}
		},
	})
	names := make([]string, 0, len(c.cfg.Queues))
	for name := range c.cfg.Queues {
		names = append(names, name)
	}
	sort.Strings(names)
	c.registrar = newRegistrar(c, names)
	c.settingsLoop = c.startSettingsRefresh(ctx)
	c.completer.Start(ctx)
	c.heartbeat.Start(ctx)
	c.elector.Start(ctx)
	c.rescuer.Start(ctx)
	c.registrar.Start(ctx)
	c.queues = make(map[string]*queueWorker, len(c.cfg.Queues))
	for name, qc := range c.cfg.Queues {
		qw := newQueueWorker(c, name, qc.MaxWorkers)
		c.queues[name] = qw
		go qw.run()
	}
	if n, ok := c.drv.(driver.Notifier); ok {
		// Tasks committed by other processes wake the workers at once.
		c.listener = notify.New(notify.Config{Notifier: n, Logger: log, Wake: c.wakeQueue})
		c.listener.Start(ctx)
	}
	log.Info("keel: workers started", "node", c.cfg.Node, "queues", names)
	return nil
}

// Stop shuts the workers down gracefully: it stops claiming, lets running
// tasks finish until ctx is done, then cancels the rest and releases their
// tasks to pending at once without using an attempt. It returns after every
// task's outcome is stored and the background services have ended.
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	if !c.started || c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	queues := c.queues
	c.mu.Unlock()

	for _, qw := range queues {
		close(qw.stop)
	}
	for _, qw := range queues {
		<-qw.done
		qw.stopTimer()
	}
	finished := make(chan struct{})
	go func() {
		c.inflight.Wait()
		close(finished)
	}()
	forced := false
	select {
	case <-finished:
	case <-ctx.Done():
		forced = true
		c.cancelWork(errStopping)
		<-finished // bounded: each execution waits at most TimeoutGrace for its handler
	}
	c.cancelWork(errStopping)
	c.completer.Stop()
	c.rescuer.Stop()
	c.heartbeat.Stop()
	c.registrar.Stop()
	c.settingsLoop.Stop()
	c.elector.Stop()
	c.listener.Stop()
	c.cfg.Logger.Info("keel: workers stopped", "node", c.cfg.Node, "cancelled_in_flight", forced)
	return nil
}

// wakeQueue wakes the worker of queue now, or every worker for "".
func (c *Client) wakeQueue(queue string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if queue != "" {
		if qw := c.queues[queue]; qw != nil {
			qw.wake()
		}
		return
	}
	for _, qw := range c.queues {
		qw.wake()
	}
}

// wake tells the queue's worker that a task becomes ready at runAt.
func (c *Client) wake(queue string, runAt time.Time) {
	c.mu.Lock()
	qw := c.queues[queue]
	c.mu.Unlock()
	if qw == nil {
		return
	}
	if runAt.After(c.cfg.Now()) {
		qw.wakeAt(runAt)
		return
	}
	qw.wake()
}

func (c *Client) runningIDs() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]int64, 0, len(c.running))
	for id := range c.running {
		ids = append(ids, id)
	}
	return ids
}

// leaseLost cancels handlers whose tasks are no longer ours.
func (c *Client) leaseLost(ids []int64, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if all {
		for _, ex := range c.running {
			ex.cancel(ErrLeaseLost)
		}
		return
	}
	for _, id := range ids {
		// A task its handler completed with CompleteTx is no longer running
		// in the database, but it was not lost: let the handler return.
		if ex := c.running[id]; ex != nil && !ex.completedTx {
			ex.cancel(ErrLeaseLost)
		}
	}
}

// queueWorker claims tasks of one queue up to its concurrency.
type queueWorker struct {
	c     *Client
	name  string
	limit int
	// active counts handlers running; finishing counts attempts whose
	// handler returned but whose outcome is not stored yet. Both are guarded
	// by c.mu. A slot frees when the handler returns, so the next claim and
	// the previous completions share a group commit; finishing is bounded
	// by limit so a slow database pushes back on claiming.
	active    int
	finishing int
	wakeup    chan struct{}
	freed     chan struct{}
	stop      chan struct{}
	done      chan struct{}
	// A timer wakes the worker when a task scheduled in this process (a
	// retry, a snooze, a delayed enqueue) becomes due before the next poll.
	timerMu sync.Mutex
	timerAt time.Time
	timer   *time.Timer
}

func newQueueWorker(c *Client, name string, limit int) *queueWorker {
	return &queueWorker{
		c: c, name: name, limit: limit,
		wakeup: make(chan struct{}, 1), freed: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
}

func (q *queueWorker) free() int {
	q.c.mu.Lock()
	defer q.c.mu.Unlock()
	limit := q.c.queueLimit(q.name, q.limit)
	return max(0, min(limit-q.active, 2*limit-q.active-q.finishing))
}

// run is the claim loop: claim while slots are free and the queue yields
// full batches, otherwise wait for a wake-up, a freed slot or the poll.
func (q *queueWorker) run() {
	defer close(q.done)
	c := q.c
	batch := min(c.cfg.ClaimBatch, q.limit)
	// Claiming on every single freed slot makes tiny batches: wait until a
	// quarter of a batch is free, or briefly for more.
	threshold := max(1, batch/4)
	poll := time.NewTimer(0)
	defer poll.Stop()
	drained := false // the last claim found fewer tasks than it asked for
	fill := time.NewTimer(time.Hour)
	fill.Stop()
	defer fill.Stop()
	for {
		select {
		case <-q.stop:
			return
		default:
		}
		if free := q.free(); free > 0 {
			got, asked, err := q.claim(min(free, batch))
			if err != nil {
				c.cfg.Logger.Warn("keel: claim failed", "queue", q.name, "error", err)
			}
			drained = got < asked
			if got == asked && asked > 0 {
				continue
			}
		}
		poll.Reset(c.cfg.PollInterval)
	wait:
		for {
			select {
			case <-q.stop:
				return
			case <-q.wakeup:
				drained = false
				break wait
			case <-poll.C:
				break wait
			case <-fill.C:
				break wait
			case <-q.freed:
				if drained {
					continue // nothing to claim until a wake-up or the poll
				}
				if q.free() >= threshold {
					break wait
				}
				fill.Reset(2 * time.Millisecond)
			}
		}
		poll.Stop()
		fill.Stop()
	}
}

// claim takes up to n tasks and starts them; it returns how many it got
// and how many it asked for (fewer than n under a type's concurrency cap).
func (q *queueWorker) claim(n int) (got, asked int, err error) {
	c := q.c
	exclude, n := c.claimFilter(n)
	if n == 0 {
		return 0, 0, nil
	}
	now := c.cfg.Now()
	rows, err := c.drv.Claim(c.workCtx, driver.ClaimParams{
		Queue: q.name, Limit: n, Owner: c.cfg.Node, Now: now, LeaseExpiresAt: now.Add(c.cfg.LeaseTTL),
		ExcludeTypes: exclude,
	})
	if err != nil {
		return 0, n, err
	}
	for i := range rows {
		c.applyTypeSettings(&rows[i])
		c.startExecution(q, &rows[i])
	}
	return len(rows), n, nil
}

// execution is one attempt of a task running in this process.
type execution struct {
	c      *Client
	row    *driver.TaskRow
	cancel context.CancelCauseFunc
	// completedTx is set when the handler committed its own completion.
	completedTx bool
}

type execKey struct{}

func (c *Client) startExecution(q *queueWorker, row *driver.TaskRow) {
	ctx, cancel := context.WithCancelCause(c.workCtx)
	ex := &execution{c: c, row: row, cancel: cancel}
	c.mu.Lock()
	q.active++
	c.running[row.ID] = ex
	c.mu.Unlock()
	c.inflight.Add(1)
	go c.execute(q, context.WithValue(ctx, execKey{}, ex), ex)
}

type runResult struct {
	result json.RawMessage
	err    error
	stack  string
	panic  bool
}

// execute runs one attempt and hands its outcome to the completer. The
// handler runs on this goroutine; if its context ends (timeout, stop, lost
// lease) and it does not return within TimeoutGrace, a timer reports the
// attempt instead and the late return is ignored.
func (c *Client) execute(q *queueWorker, ctx context.Context, ex *execution) {
	row := ex.row
	start := c.cfg.Now()
	var reported atomic.Bool
	report := func(tctx context.Context, res runResult) {
		if !reported.CompareAndSwap(false, true) {
			return
		}
		if res.err != nil && tctx != nil && errors.Is(context.Cause(tctx), errTimeout) {
			res.err = fmt.Errorf("%w after %v: %v", errTimeout, row.Timeout, res.err)
		}
		end := c.cfg.Now()
		t := c.transition(ctx, row, res, start, end)
		c.mu.Lock()
		q.active--
		q.finishing++
		c.mu.Unlock()
		q.signalFreed()
		c.completer.Add(completer.Request{Transition: t, LeaseExpiresAt: c.heartbeat.LeaseExpiresAt(row.ID, row.LeaseExpiresAt), Done: func(applied bool, err error) {
			c.finished(q, ex, t, applied, err)
		}})
	}
	h := c.cfg.Handlers.m[row.Type]
	if h == nil || h.run == nil {
		report(nil, runResult{err: fmt.Errorf("no handler for task type %q on node %s", row.Type, c.cfg.Node)})
		return
	}
	tctx, cancelT := context.WithTimeoutCause(ctx, row.Timeout, errTimeout)
	defer cancelT()
	var grace atomic.Pointer[time.Timer]
	stopWatch := context.AfterFunc(tctx, func() {
		grace.Store(time.AfterFunc(c.cfg.TimeoutGrace, func() {
			report(tctx, runResult{err: fmt.Errorf("handler did not return within %v after its context ended: %w",
				c.cfg.TimeoutGrace, context.Cause(tctx))})
		}))
	})
	res := runHandler(tctx, h, row)
	if !stopWatch() {
		// The context ended while the handler ran: the grace timer may be
		// armed (or about to be); whichever reports first wins.
		for i := 0; i < 1000 && grace.Load() == nil; i++ {
			runtime.Gosched()
		}
		if t := grace.Load(); t != nil {
			t.Stop()
		}
	}
	report(tctx, res)
}

func runHandler(ctx context.Context, h *handlerEntry, row *driver.TaskRow) (res runResult) {
	defer func() {
		if p := recover(); p != nil {
			res = runResult{err: fmt.Errorf("panic: %v", p), stack: string(debug.Stack()), panic: true}
		}
	}()
	result, err := h.run(ctx, row)
	return runResult{result: result, err: err}
}

// transition maps an attempt's result to the task's next state.
func (c *Client) transition(ctx context.Context, row *driver.TaskRow, res runResult, start, end time.Time) driver.Transition {
	t := driver.Transition{ID: row.ID, Fence: row.Fence}
	if res.err == nil {
		t.State, t.Result = driver.StateSucceeded, res.result
		return t
	}
	if errors.Is(context.Cause(ctx), errStopping) {
		// Shutdown cut the attempt short: release the task, attempt refunded.
		t.State, t.RunAt, t.Refund = driver.StatePending, end, true
		return t
	}
	var snooze *snoozeError
	if errors.As(res.err, &snooze) {
		t.State, t.RunAt, t.Refund = driver.StatePending, end.Add(snooze.delay), true
		return t
	}
	ae := &driver.AttemptError{Attempt: row.Attempt, Node: c.cfg.Node, Start: start, End: end,
		Outcome: driver.OutcomeError, Error: truncate(res.err.Error(), 4096), Stack: truncate(res.stack, 16384)}
	t.Error = ae
	var perm *permanentError
	var after *retryAfterError
	switch {
	case res.panic:
		ae.Outcome = driver.OutcomePanic
	case errors.Is(res.err, errTimeout) || isTimeout(res.err):
		ae.Outcome = driver.OutcomeTimeout
	case errors.As(res.err, &perm):
		ae.Outcome = driver.OutcomePermanent
		t.State = driver.StateDead
		return t
	}
	if row.Attempt >= row.MaxAttempts {
		t.State = driver.StateDead
		return t
	}
	delay := c.backoff(row.Type, row.Attempt)
	if errors.As(res.err, &after) {
		delay = max(after.delay, 0)
	}
	t.State, t.RunAt = driver.StatePending, end.Add(delay)
	return t
}

// finished runs once an attempt's outcome is stored (or rejected).
func (c *Client) finished(q *queueWorker, ex *execution, t driver.Transition, applied bool, err error) {
	row := ex.row
	log := c.cfg.Logger
	c.mu.Lock()
	completedTx := ex.completedTx
	if c.running[row.ID] == ex { // a newer attempt of the task may have replaced this one
		delete(c.running, row.ID)
	}
	q.finishing--
	c.mu.Unlock()
	ex.cancel(nil)
	switch {
	case err != nil:
		log.Error("keel: storing task outcome failed; the lease will expire and the task be rescued",
			"task_id", row.ID, "type", row.Type, "attempt", row.Attempt, "error", err)
	case completedTx:
		// The handler's own transaction stored the outcome.
	case !applied:
		log.Warn("keel: task outcome rejected: lease lost or task cancelled",
			"task_id", row.ID, "type", row.Type, "attempt", row.Attempt, "state", t.State)
	case t.Error != nil:
		log.Warn("keel: task attempt failed", "task_id", row.ID, "type", row.Type, "queue", row.Queue,
			"attempt", row.Attempt, "outcome", t.Error.Outcome, "next_state", t.State, "error", t.Error.Error)
	}
	if applied && t.State == driver.StatePending {
		c.wake(row.Queue, t.RunAt)
	}
	if c.typeCapped(row.Type) {
		// Room under the type's cap: its tasks may wait in any queue,
		// which a drained worker would not look for until the poll.
		c.wakeQueue("")
	}
	q.signalFreed()
	c.inflight.Done()
}

// wakeAt makes the worker look for tasks at at, when that is sooner than
// the poll would.
func (q *queueWorker) wakeAt(at time.Time) {
	d := at.Sub(q.c.cfg.Now())
	if d >= q.c.cfg.PollInterval {
		return
	}
	q.timerMu.Lock()
	defer q.timerMu.Unlock()
	select {
	case <-q.stop:
		return // stopping: no new timers
	default:
	}
	if q.timer != nil && !q.timerAt.After(at) {
		return // already waking up by then
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	q.timerAt = at
	q.timer = time.AfterFunc(max(d, 0), func() {
		q.timerMu.Lock()
		q.timer = nil
		q.timerMu.Unlock()
		q.wake()
	})
}

func (q *queueWorker) wake() {
	select {
	case q.wakeup <- struct{}{}:
	default:
	}
}

func (q *queueWorker) stopTimer() {
	q.timerMu.Lock()
	defer q.timerMu.Unlock()
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
}

func (q *queueWorker) signalFreed() {
	select {
	case q.freed <- struct{}{}:
	default:
	}
}

// isTimeout reports whether err says it is a timeout (net.Error,
// context.DeadlineExceeded and os.ErrDeadlineExceeded do), so an outbound
// call that timed out is recorded with outcome timeout, not error.
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
