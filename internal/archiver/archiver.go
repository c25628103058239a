// Package archiver moves finished tasks past their retention from the task
// table to the archive, and deletes archived rows past
// DeleteArchivedAfter, on the elected leader only, a batch at a time so
// that workers keep running.
package archiver

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Pause is how long the archiver waits between two batches of a pass, so
// that workers' writes get in between (on SQLite all writes go through one
// writer).
const Pause = 10 * time.Millisecond

// Store is what an Archiver needs of a driver.
type Store interface {
	Archive(ctx context.Context, params driver.ArchiveParams) (driver.ArchiveResult, error)
	PurgeArchive(ctx context.Context, before time.Time, limit int) (int64, error)
}

// Config wires an Archiver.
type Config struct {
	Driver Store
	Node   string
	// Interval is how often a pass runs (the first at Start).
	Interval time.Duration
	// Batch is how many rows one Archive or PurgeArchive call moves or
	// deletes at most.
	Batch int
	// RetainSucceeded is how long succeeded and cancelled tasks stay in
	// the task table after they finished; RetainDead the same for dead
	// tasks.
	RetainSucceeded time.Duration
	RetainDead      time.Duration
	// DeleteArchivedAfter is how long archived rows are kept; 0: for ever.
	DeleteArchivedAfter time.Duration
	// Clock paces the passes and the pauses; default Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// Leading gates the work: only the elected leader archives, and a
	// pass ends when leadership is lost.
	Leading func() bool
}

// Totals counts what an Archiver did (as leader) since it started: tasks
// moved to the archive per state, archived rows deleted, and the Archive
// calls (batches) it made.
type Totals struct {
	Succeeded, Cancelled, Dead int64
	Deleted                    int64
	Batches                    int64
}

// Archiver is the leader's archival service.
type Archiver struct {
	cfg  Config
	clk  service.Clock
	loop *service.Loop

	succeeded, cancelled, dead, deleted, batches atomic.Int64
}

// New returns an Archiver.
func New(cfg Config) *Archiver {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Archiver{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now)}
}

// Start runs a pass at once and then every Interval until Stop.
func (a *Archiver) Start(ctx context.Context) {
	a.loop = service.Start(ctx, func(ctx context.Context) {
		service.EveryOn(ctx, a.clk, a.cfg.Interval, a.RunOnce)
	})
}

// Stop stops the service and waits for a pass under way to end.
func (a *Archiver) Stop() { a.loop.Stop() }

// Totals returns what the Archiver did since it started.
func (a *Archiver) Totals() Totals {
	return Totals{Succeeded: a.succeeded.Load(), Cancelled: a.cancelled.Load(), Dead: a.dead.Load(),
		Deleted: a.deleted.Load(), Batches: a.batches.Load()}
}

// RunOnce runs one pass when leading. It moves succeeded and cancelled
// tasks finished more than RetainSucceeded ago and dead tasks finished
// more than RetainDead ago to the archive, Batch at a time until a batch
// moves fewer, pausing between batches, then, when DeleteArchivedAfter is
// set, deletes archived rows older than that the same way. What it moved
// and deleted is logged (one INFO line each per pass that did something)
// and counted (Totals). A failure is logged and ends that part of the
// pass: the next try is a pass later.
func (a *Archiver) RunOnce(ctx context.Context) {
	if !a.cfg.Leading() {
		return
	}
	now := a.clk.Now()
	p := driver.ArchiveParams{
		SucceededBefore: now.Add(-a.cfg.RetainSucceeded), DeadBefore: now.Add(-a.cfg.RetainDead),
		Limit: a.cfg.Batch, Now: now,
	}
	var moved driver.ArchiveResult
	batches := 0
	for a.cfg.Leading() {
		res, err := a.cfg.Driver.Archive(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				a.cfg.Logger.Warn("keel: archiving finished tasks failed; next try in one interval",
					"node", a.cfg.Node, "error", err)
			}
			break
		}
		batches++
		moved.Add(res)
		a.batches.Add(1)
		a.succeeded.Add(res.Succeeded)
		a.cancelled.Add(res.Cancelled)
		a.dead.Add(res.Dead)
		if res.Total() < int64(p.Limit) || !a.pause(ctx) {
			break
		}
	}
	if moved.Total() > 0 {
		a.cfg.Logger.Info("keel: archived finished tasks", "node", a.cfg.Node,
			"succeeded", moved.Succeeded, "cancelled", moved.Cancelled, "dead", moved.Dead, "batches", batches,
			"succeeded_before", p.SucceededBefore, "dead_before", p.DeadBefore)
	}
	if a.cfg.DeleteArchivedAfter > 0 && ctx.Err() == nil {
		a.purge(ctx, now.Add(-a.cfg.DeleteArchivedAfter))
	}
}

// purge deletes rows archived before before, a batch at a time, and logs
// how many it deleted.
func (a *Archiver) purge(ctx context.Context, before time.Time) {
	var deleted int64
	for a.cfg.Leading() {
		n, err := a.cfg.Driver.PurgeArchive(ctx, before, a.cfg.Batch)
		if err != nil {
			if ctx.Err() == nil {
				a.cfg.Logger.Warn("keel: deleting archived tasks failed; next try in one interval",
					"node", a.cfg.Node, "error", err)
			}
			break
		}
		deleted += n
		a.deleted.Add(n)
		if n < int64(a.cfg.Batch) || !a.pause(ctx) {
			break
		}
	}
	if deleted > 0 {
		a.cfg.Logger.Info("keel: deleted archived tasks", "node", a.cfg.Node,
			"deleted", deleted, "archived_before", before)
	}
}

// pause waits Pause between two batches and reports whether ctx is still
// live.
func (a *Archiver) pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-a.clk.After(Pause):
		return true
	}
}
