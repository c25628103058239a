// Package engine runs tasks: it claims them from a driver, executes their
// handlers, classifies each attempt's outcome and stores it, and runs the
// background services a worker process needs (completer, heartbeat,
// leader election, rescuer, archiver, node registry, settings refresh,
// wake-ups).
//
// The root package keel is the user's API; it builds a Config from its own
// configuration and handlers and hands it to New. The engine never sees a
// keel.Client: what it needs arrives as plain values and funcs.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/archiver"
	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/completer"
	"github.com/keelq/keel/internal/heartbeat"
	"github.com/keelq/keel/internal/leader"
	"github.com/keelq/keel/internal/nodes"
	"github.com/keelq/keel/internal/notify"
	"github.com/keelq/keel/internal/rescuer"
	"github.com/keelq/keel/internal/service"
)

// Causes with which the engine cancels a handler's context; a handler can
// read them with context.Cause.
var (
	ErrTimeout   = errors.New("keel: task timeout exceeded")
	ErrStopping  = errors.New("keel: worker stopping")
	ErrCancelled = errors.New("keel: task cancelled")
	// ErrLeaseLost: the task is no longer held by this worker.
	ErrLeaseLost = errors.New("keel: task lease lost")
)

// Handler runs one attempt of a task: it decodes the payload, calls the
// user's function and returns the result it set.
type Handler func(ctx context.Context, row *driver.TaskRow) (json.RawMessage, error)

// Config is everything the engine needs, with defaults already applied
// and validated by the caller.
type Config struct {
	Driver driver.Driver
	Node   string
	// Version is the keel version the node registry shows for this process.
	Version string
	Logger  *slog.Logger
	Now     func() time.Time
	// Queues maps each queue this process works to its MaxWorkers.
	Queues map[string]int
	// QueuePrefetch maps queues to how many tasks their worker may hold
	// claimed beyond its free slots, to start as soon as one frees (see
	// prefetch.go); a queue not in it holds none.
	QueuePrefetch map[string]int
	// QueuePoll overrides PollInterval for some queues: keel's own queue,
	// whose tasks this process mostly enqueues itself (and so wakes its
	// workers for), polls rarely.
	QueuePoll map[string]time.Duration
	// Handlers maps task types to their handlers; a type mapped to nil is
	// declared (known, with defaults) but not run here.
	Handlers map[string]Handler
	// Backoff is the retry policy of types without their own; TypeBackoff
	// holds the types registered with one. Runtime settings override both.
	Backoff     backoff.Policy
	TypeBackoff map[string]backoff.Policy
	// MaxSnoozes bounds how often a task may snooze before its next snooze
	// dead-letters it (0: no bound); TypeMaxSnoozes holds the types
	// registered with their own bound.
	MaxSnoozes     int
	TypeMaxSnoozes map[string]int

	LeaseTTL          time.Duration
	HeartbeatInterval time.Duration
	PollInterval      time.Duration
	RescueInterval    time.Duration
	ReconcileInterval time.Duration
	// Archival (see internal/archiver): retention of succeeded and cancelled
	// tasks and of dead ones, how long archived rows are kept (0: for
	// ever), how often the leader archives and how many tasks one batch
	// moves.
	RetainSucceeded     time.Duration
	RetainDead          time.Duration
	DeleteArchivedAfter time.Duration
	ArchiveInterval     time.Duration
	ArchiveBatch        int
	// MaintainInterval is how often the leader has a driver.Maintainer
	// maintain the task table; 0: never.
	MaintainInterval time.Duration
	HistoryRetention time.Duration
	SettingsInterval time.Duration
	ClaimBatch       int
	TimeoutGrace     time.Duration
	// MaxRunaway is how many handlers may ignore their ended context and
	// keep running before the engine stops claiming; 0: no bound.
	MaxRunaway int
	// Tracer makes one span per attempt; nil: none (a no-op tracer).
	Tracer trace.Tracer
	// Observer is told about attempts and rescues; nil: no one is.
	Observer Observer
	// FollowUps builds the on_dead follow-up tasks of a task about to be
	// dead-lettered by t (the worker's decision or the rescuer's; a row
	// the rescuer read has no payload); the driver inserts them in the
	// same transaction. An error delays the task's death. Nil: none.
	FollowUps func(ctx context.Context, row *driver.TaskRow, t driver.Transition) ([]driver.InsertParams, error)
	// BrakeDefaults are the automatic brake's thresholds of the types that
	// declare none (see driver.BrakeConfig); the leader evaluates brakes
	// every SettingsInterval.
	BrakeDefaults driver.BrakeConfig
	// Loops run beside the workers, each every Interval from Start until
	// Stop (the first run at once); a loop for the leader alone checks
	// Engine.Leading.
	Loops []Loop
}

// Loop is periodic work of the client's own (alerts), run by the engine's
// lifetime.
type Loop struct {
	Interval time.Duration
	Run      func(ctx context.Context)
}

// Engine is the running worker side of a client.
type Engine struct {
	cfg Config
	drv driver.Driver

	mu       sync.Mutex
	stopped  bool
	queues   map[string]*producer
	running  map[int64]*execution
	inflight sync.WaitGroup
	// workCtx parents every handler context; cancelWork ends them all.
	workCtx    context.Context
	cancelWork context.CancelCauseFunc

	completer *completer.Completer
	heartbeat *heartbeat.Heartbeat
	elector   *leader.Elector
	rescuer   *rescuer.Rescuer
	listener  *notify.Listener // nil unless the driver is a driver.Notifier
	// notifies: the driver is a driver.Notifier, which wakes the workers of
	// every process for tasks ready at once.
	notifies  bool
	registrar *nodes.Registrar

	// handled are the task types with a handler, sorted: the only types
	// a claim takes, so no worker claims a task it cannot run.
	handled []string

	settings   settings
	brakes     brakes        // the brakes not closed, as last read
	brakeLoop  *service.Loop // the leader's brake evaluation
	reconcile  *service.Loop // the leader's counter check
	archiver   *archiver.Archiver
	maintainer maintainer      // the leader's upkeep of the database
	loops      []*service.Loop // Config.Loops
	runaway    atomic.Int64    // handlers running past TimeoutGrace after their context ended
}

// Start builds the engine and starts its workers and services. ctx carries
// values only: end the work with Stop.
func Start(ctx context.Context, cfg Config) *Engine {
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	e := &Engine{cfg: cfg, drv: cfg.Driver, running: map[int64]*execution{}}
	for t, h := range cfg.Handlers {
		if h != nil {
			e.handled = append(e.handled, t)
		}
	}
	sort.Strings(e.handled)
	_, e.notifies = cfg.Driver.(driver.Notifier)
	e.workCtx, e.cancelWork = context.WithCancelCause(context.WithoutCancel(ctx))
	log := cfg.Logger
	var overflow time.Duration // the completer's default: wait for a write under way
	if gc, ok := e.drv.(driver.GroupCommitter); ok && gc.GroupCommits() {
		overflow = -1 // writes side by side share a commit: never wait
	}
	e.completer = completer.New(completer.Config{Driver: e.drv, Owner: cfg.Node, Now: cfg.Now, Logger: log, Overflow: overflow})
	e.heartbeat = heartbeat.New(heartbeat.Config{
		Driver: e.drv, Owner: cfg.Node, Interval: cfg.HeartbeatInterval, LeaseTTL: cfg.LeaseTTL,
		Now: cfg.Now, Logger: log, Running: e.runningIDs, Lost: e.leaseLost,
	})
	e.elector = leader.New(leader.Config{Driver: e.drv, Owner: cfg.Node, TTL: cfg.LeaseTTL, Now: cfg.Now, Logger: log,
		OnLead: func() { e.rescuer.Kick(); e.kickMaintainer() }}) // a new leader rescues and maintains at once
	e.rescuer = rescuer.New(rescuer.Config{
		Driver: e.drv, Node: cfg.Node, Interval: cfg.RescueInterval, Now: cfg.Now, Logger: log,
		Decide: e.decideExpired, Leading: e.elector.Leading,
		Rescued: func(rows []driver.TaskRow) {
			for i := range rows {
				e.Wrote(&rows[i])
				e.observeRescue(&rows[i])
			}
		},
	})
	names := make([]string, 0, len(cfg.Queues))
	for name := range cfg.Queues {
		names = append(names, name)
	}
	sort.Strings(names)
	host, _ := os.Hostname()
	e.registrar = nodes.New(nodes.Config{
		Driver: e.drv,
		Node: driver.NodeParams{Name: cfg.Node, Host: host, PID: os.Getpid(), Queues: names, StartedAt: cfg.Now(),
			Workers: maps.Clone(cfg.Queues), Version: cfg.Version},
		Running:  e.runningCount,
		Interval: cfg.HeartbeatInterval, LeaseTTL: cfg.LeaseTTL,
		Now: cfg.Now, Logger: log, Leading: e.elector.Leading,
	})
	e.settings.load(ctx, e) // workers start with the stored settings
	e.loadBrakes(ctx)       // and brakes
	e.settings.loop = service.Start(ctx, func(ctx context.Context) {
		service.Every(ctx, cfg.SettingsInterval, func(ctx context.Context) {
			changed := e.settings.load(ctx, e)
			if e.loadBrakes(ctx) || changed {
				e.WakeQueue("") // a resumed queue, a raised limit or a closed brake frees slots
			}
		})
	})
	e.brakeLoop = service.Start(ctx, func(ctx context.Context) {
		service.Every(ctx, cfg.SettingsInterval, e.evaluateBrakes)
	})
	e.reconcile = service.Start(ctx, func(ctx context.Context) {
		service.Every(ctx, cfg.ReconcileInterval, e.reconcileCounters)
	})
	e.archiver = archiver.New(archiver.Config{
		Driver: e.drv, Node: cfg.Node, Interval: cfg.ArchiveInterval, Batch: cfg.ArchiveBatch,
		RetainSucceeded: cfg.RetainSucceeded, RetainDead: cfg.RetainDead, DeleteArchivedAfter: cfg.DeleteArchivedAfter,
		Now: cfg.Now, Logger: log, Leading: e.elector.Leading,
	})
	e.archiver.Start(ctx)
	for _, l := range cfg.Loops {
		e.loops = append(e.loops, service.Start(ctx, func(ctx context.Context) { service.Every(ctx, l.Interval, l.Run) }))
	}
	e.startMaintainer(ctx)
	e.completer.Start(ctx)
	e.heartbeat.Start(ctx)
	e.elector.Start(ctx)
	e.rescuer.Start(ctx)
	e.registrar.Start(ctx)
	e.mu.Lock()
	e.queues = make(map[string]*producer, len(cfg.Queues))
	for name, limit := range cfg.Queues {
		e.queues[name] = newProducer(e, name, limit, cfg.QueuePrefetch[name])
	}
	for _, p := range e.queues {
		go p.run()
	}
	e.mu.Unlock()
	if n, ok := e.drv.(driver.Notifier); ok {
		// Tasks committed by other processes wake the workers at once.
		e.listener = notify.New(notify.Config{Notifier: n, Logger: log, Wake: e.WakeQueue})
		e.listener.Start(ctx)
	}
	log.Info("keel: workers started", "node", cfg.Node, "queues", names)
	return e
}

// Archived returns what this process's archiver did since Start.
func (e *Engine) Archived() archiver.Totals {
	if e == nil {
		return archiver.Totals{}
	}
	return e.archiver.Totals()
}

// Leading reports whether this process holds the leadership lease; a nil
// Engine (a client not started) does not.
func (e *Engine) Leading() bool { return e != nil && e.elector.Leading() }

// Stop shuts the workers down gracefully: it stops claiming, lets running
// tasks finish until ctx is done, then cancels the rest and releases their
// tasks to pending at once without using an attempt. It returns after every
// task's outcome is stored and the background services have ended.
func (e *Engine) Stop(ctx context.Context) {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.stopped = true
	queues := e.queues
	e.mu.Unlock()

	for _, l := range e.loops {
		l.Stop()
	}
	for _, p := range queues {
		close(p.stop)
	}
	for _, p := range queues {
		<-p.done
		p.timer.stop()
		p.releaseHeld() // prefetched tasks that never started go back at once
	}
	finished := make(chan struct{})
	go func() {
		e.inflight.Wait()
		close(finished)
	}()
	forced := false
	select {
	case <-finished:
	case <-ctx.Done():
		forced = true
		e.cancelWork(ErrStopping)
		<-finished // bounded: each execution waits at most TimeoutGrace for its handler
	}
	e.cancelWork(ErrStopping)
	e.completer.Stop()
	e.rescuer.Stop()
	e.heartbeat.Stop()
	e.registrar.Stop()
	e.settings.loop.Stop()
	e.brakeLoop.Stop()
	e.reconcile.Stop()
	e.archiver.Stop()
	e.maintainer.loop.Stop()
	e.elector.Stop()
	e.listener.Stop()
	e.cfg.Logger.Info("keel: workers stopped", "node", e.cfg.Node, "cancelled_in_flight", forced)
}

// WakeQueue wakes the worker of queue now, or every worker for "".
func (e *Engine) WakeQueue(queue string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if queue != "" {
		if p := e.queues[queue]; p != nil {
			p.wake()
		}
		return
	}
	for _, p := range e.queues {
		p.wake()
	}
}

// Wake tells the queue's worker that a task becomes ready at runAt.
func (e *Engine) Wake(queue string, runAt time.Time) {
	e.mu.Lock()
	p := e.queues[queue]
	e.mu.Unlock()
	if p == nil {
		return
	}
	if runAt.After(e.cfg.Now()) {
		p.wakeAt(runAt)
		return
	}
	p.wake()
}

// Wrote tells the workers that this process wrote row (an enqueue, a
// retry, a rescue). A task due later arms its queue's timer. A task ready
// at once wakes the queue's worker now, unless the driver is a
// driver.Notifier: its write wakes every process, this one included, once.
func (e *Engine) Wrote(row *driver.TaskRow) {
	if e == nil || row.State != driver.StatePending || driver.Held(row.RunAt) ||
		e.notifies && !row.RunAt.After(row.UpdatedAt) {
		return
	}
	e.Wake(row.Queue, row.RunAt)
}

// WroteQueue tells the workers that this process made tasks of queue ready
// ("": of every queue), as RetryMatching does. A driver.Notifier's write
// wakes every process itself.
func (e *Engine) WroteQueue(queue string) {
	if e != nil && !e.notifies {
		e.WakeQueue(queue)
	}
}

// Cancel cancels the handler running task id in this process, if any.
func (e *Engine) Cancel(id int64) {
	if e == nil {
		return
	}
	e.mu.Lock()
	ex := e.running[id]
	held := false
	if ex != nil {
		ex.cancelled.Store(true)
		ex.cancel(ErrCancelled)
		held = e.dropHeldLocked(ex)
	}
	e.mu.Unlock()
	if held {
		e.release(ex) // fenced: the cancel stands
	}
}

// runningCount is how many tasks this process runs now.
func (e *Engine) runningCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running)
}

func (e *Engine) runningIDs() []int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]int64, 0, len(e.running))
	for id := range e.running {
		ids = append(ids, id)
	}
	return ids
}

// leaseLost cancels handlers whose tasks are no longer ours.
// A held task (prefetch) is dropped and its release handed to the
// completer, which finds it fenced off.
func (e *Engine) leaseLost(ids []int64, all bool) {
	var back []*execution
	e.mu.Lock()
	if all {
		for _, ex := range e.running {
			ex.cancel(ErrLeaseLost)
			if e.dropHeldLocked(ex) {
				back = append(back, ex)
			}
		}
	}
	for _, id := range ids {
		// A task its handler completed with CompleteTx is no longer running
		// in the database, but it was not lost: let the handler return.
		if ex := e.running[id]; ex != nil && !ex.completedTx {
			ex.cancel(ErrLeaseLost)
			if e.dropHeldLocked(ex) {
				back = append(back, ex)
			}
		}
	}
	e.mu.Unlock()
	for _, ex := range back {
		e.release(ex)
	}
}

// CompleteTx stores the success of the attempt whose handler ctx belongs
// to inside tx. inHandler is false, and nothing is done, when ctx is not a
// handler's context; err wraps ErrLeaseLost when the task is no longer
// held by this worker.
func CompleteTx(ctx context.Context, tx driver.Tx, result []byte) (inHandler bool, err error) {
	ex, _ := ctx.Value(execKey{}).(*execution)
	if ex == nil {
		return false, nil
	}
	e := ex.e
	applied, err := e.drv.FinishTx(ctx, tx, e.cfg.Node, e.cfg.Now(), driver.Transition{
		ID: ex.row.ID, Fence: ex.row.Fence, State: driver.StateSucceeded, Result: result, Task: ex.row,
	})
	if err != nil {
		return true, fmt.Errorf("complete task %d: %w", ex.row.ID, err)
	}
	if !applied {
		return true, fmt.Errorf("complete task %d: %w", ex.row.ID, ErrLeaseLost)
	}
	e.mu.Lock()
	ex.completedTx = true
	e.mu.Unlock()
	return true, nil
}

// InHandler reports whether ctx is a handler's context.
func InHandler(ctx context.Context) bool {
	ex, _ := ctx.Value(execKey{}).(*execution)
	return ex != nil
}
