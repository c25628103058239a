package keel

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/backlog"
	"github.com/keelq/keel/internal/batch"
	"github.com/keelq/keel/internal/config"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/ondead"
	"github.com/keelq/keel/internal/sequence"
	"github.com/keelq/keel/internal/workflow"
)

// reservedWorkers run keel's own tasks (alerts, the drill, OnDead) in ReservedQueue.
const reservedWorkers = 4

// Start runs the workers of every configured queue, the batched completer
// and heartbeat, the node registry and the leader-elected rescuer. It
// returns at once; call Stop to end them. ctx carries values only: cancel
// work with Stop.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.eng.Load() != nil {
		return fmt.Errorf("%w: already started", ErrNotWorker)
	}
	if !c.cfg.Handlers.handled() && (c.cfg.Alerts.Off || len(c.cfg.Alerts.Notifiers) == 0) && len(c.schedules) == 0 && c.cfg.OnDead == nil {
		return fmt.Errorf("%w: no handlers registered (and no alert notifiers to deliver to, no schedules to run)", ErrNotWorker)
	}
	if err := c.decl.Declare(ctx); err != nil {
		return err
	}
	if err := c.sched.StoreConfigured(ctx); err != nil {
		return fmt.Errorf("keel: store the configured schedules: %w", unavailable(ctx, err))
	}
	cfg := config.Engine(c.cfg.fields(), c.cfg.Queues)
	cfg.Driver, cfg.Tracer, cfg.Observer = c.drv, c.trace, engineObserver{&c.obs}
	cfg.BrakeDefaults = driver.BrakeConfig{Window: DefaultBrakeWindow, Threshold: DefaultBrakeThreshold, Cooldown: DefaultBrakeCooldown}
	cfg.Handlers = make(map[string]engine.Handler, len(c.cfg.Handlers.m))
	for t, h := range c.cfg.Handlers.m {
		if h.run != nil {
			cfg.Handlers[t] = h.run
		}
	}
	cfg.TypeBackoff, cfg.TypeMaxSnoozes = enqueue.Retries(c.types)
	dead := ondead.New(ondead.Config{Driver: c.drv, Now: c.cfg.Now, Declaration: c.declaration, Reserved: reservedType,
		Queue: DefaultQueue, HookQueue: ReservedQueue, MaxAttempts: c.cfg.MaxAttempts, Timeout: c.cfg.Timeout,
		Hook: func(ctx context.Context, row *driver.TaskRow) error { return c.cfg.OnDead(ctx, *infoFromRow(row)) }})
	dead.Install(&cfg, c.cfg.OnDead != nil, reservedWorkers)
	if !c.cfg.Alerts.Off {
		c.alerter.Install(&cfg, reservedWorkers, c.cfg.Alerts.Interval)
	}
	if store, ok := c.drv.(driver.Batcher); ok {
		cfg.Loops = append(cfg.Loops, engine.Loop{Interval: batch.Interval, Run: newBatchFinisher(c, store).Run})
	}
	if store, ok := c.drv.(driver.Sequencer); ok {
		cfg.Loops = append(cfg.Loops, engine.Loop{Interval: sequence.Interval, Run: sequence.New(sequence.Config{Store: store,
			Now: c.cfg.Now, Logger: c.cfg.Logger, Leading: func() bool { return c.eng.Load().Leading() }}).Run})
	}
	if store, ok := c.drv.(driver.Workflows); ok { // the leader releases held tasks
		r := workflow.New(workflow.Config{Store: store, Now: c.cfg.Now, Logger: c.cfg.Logger,
			Leading: func() bool { return c.eng.Load().Leading() }})
		p := workflow.NewPruner(workflow.PrunerConfig{Store: store, Now: c.cfg.Now, Logger: c.cfg.Logger,
			Leading: func() bool { return c.eng.Load().Leading() }})
		cfg.Loops = append(cfg.Loops, engine.Loop{Interval: workflow.Interval, Run: r.Run},
			engine.Loop{Interval: workflow.PruneEvery, Run: p.Run})
	}
	if store, ok := c.drv.(backlog.Store); ok {
		cfg.Loops = append(cfg.Loops, engine.Loop{Interval: backlog.Interval, Run: newBacklogSampler(c, store).RunOnce})
	}
	c.eng.Store(engine.Start(ctx, cfg))
	c.sched.Start(ctx)
	c.ramps.Start(ctx)
	return nil
}

// newBatchFinisher is the leader's batch finisher (package batch creates
// the batches).
func newBatchFinisher(c *Client, store driver.Batcher) *batch.Finisher {
	return batch.New(batch.Config{Store: store, Now: c.cfg.Now, Logger: c.cfg.Logger,
		Retention: batch.Retention(c.cfg.RetainSucceeded, c.cfg.RetainDead, c.cfg.DeleteArchivedAfter),
		Leading:   func() bool { return c.eng.Load().Leading() },
		Finished: func(b *driver.BatchRow) {
			if c.obs.active() {
				oc := OutcomeSucceeded
				if !batch.Succeeded(b) {
					oc = OutcomeFailed
				}
				c.obs.emit(Event{Kind: EventBatchFinished, BatchID: b.ID, Outcome: oc})
			}
		}})
}

// Stop shuts the workers down gracefully: it stops claiming, lets running
// tasks finish until ctx is done, then cancels the rest and releases their
// tasks to pending at once without using an attempt. It returns after every
// task's outcome is stored and the background services have ended.
func (c *Client) Stop(ctx context.Context) error {
	if e := c.eng.Load(); e != nil {
		c.sched.Stop()
		c.ramps.Stop()
		e.Stop(ctx)
	}
	return nil
}

// RunawayHandlers returns how many handlers of this client ignored their
// ended context (timeout, stop, lost lease, cancel) for longer than
// Config.TimeoutGrace and are still running. Their attempts are recorded;
// while Config.MaxRunawayHandlers of them run, the client claims nothing.
func (c *Client) RunawayHandlers() int {
	return c.eng.Load().Runaway()
}

// ArchiveTotals counts what this process's archiver did since Start, as
// the elected leader (other processes count nothing): tasks moved to the
// archive per state (Config.RetainSucceeded, Config.RetainDead), archived
// tasks deleted (Config.DeleteArchivedAfter) and the archival batches it
// ran.
type ArchiveTotals struct {
	Succeeded, Cancelled, Dead int64
	Deleted                    int64
	Batches                    int64
}

// Archived returns what this client's archiver did since Start; zero
// before Start and on a client that is not the leader.
func (c *Client) Archived() ArchiveTotals {
	return ArchiveTotals(c.eng.Load().Archived())
}
