package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
)

// archivePause is how long the archiver waits between two batches of a
// round, so that workers' writes get in between (on SQLite all writes go
// through one writer).
const archivePause = 10 * time.Millisecond

// ArchiveTotals counts what this process's archiver did (as leader) since
// it started: tasks moved to the archive per state, archived rows deleted,
// and the Archive calls (batches) it made.
type ArchiveTotals struct {
	Succeeded, Cancelled, Dead int64
	Deleted                    int64
	Batches                    int64
}

// archiveCounters are the atomic counters behind ArchiveTotals.
type archiveCounters struct {
	succeeded, cancelled, dead, deleted, batches atomic.Int64
}

// Archived returns what this process's archiver did since Start.
func (e *Engine) Archived() ArchiveTotals {
	c := &e.archived
	return ArchiveTotals{Succeeded: c.succeeded.Load(), Cancelled: c.cancelled.Load(), Dead: c.dead.Load(),
		Deleted: c.deleted.Load(), Batches: c.batches.Load()}
}

// archiveRound runs on every process at ArchiveInterval and acts on the
// leader only. It moves succeeded and cancelled tasks finished more than
// RetainSucceeded ago and dead tasks finished more than RetainDead ago to
// the archive, ArchiveBatch at a time until a batch moves fewer, pausing
// between batches so workers keep running, then, when
// DeleteArchivedAfter is set, deletes archived rows older than that the
// same way. What it moved and deleted is logged (one INFO line each per
// round that did something) and counted (Archived).
func (e *Engine) archiveRound(ctx context.Context) {
	if !e.elector.Leading() {
		return
	}
	now := e.cfg.Now()
	p := driver.ArchiveParams{
		SucceededBefore: now.Add(-e.cfg.RetainSucceeded), DeadBefore: now.Add(-e.cfg.RetainDead),
		Limit: e.cfg.ArchiveBatch, Now: now,
	}
	var moved driver.ArchiveResult
	batches := 0
	for e.elector.Leading() {
		res, err := e.drv.Archive(ctx, p)
		if err != nil {
			if ctx.Err() == nil {
				e.cfg.Logger.Warn("keel: archiving finished tasks failed; next try in one interval",
					"node", e.cfg.Node, "error", err)
			}
			break
		}
		batches++
		moved.Add(res)
		e.archived.batches.Add(1)
		e.archived.succeeded.Add(res.Succeeded)
		e.archived.cancelled.Add(res.Cancelled)
		e.archived.dead.Add(res.Dead)
		if res.Total() < int64(p.Limit) || !pause(ctx, archivePause) {
			break
		}
	}
	if moved.Total() > 0 {
		e.cfg.Logger.Info("keel: archived finished tasks", "node", e.cfg.Node,
			"succeeded", moved.Succeeded, "cancelled", moved.Cancelled, "dead", moved.Dead, "batches", batches,
			"succeeded_before", p.SucceededBefore, "dead_before", p.DeadBefore)
	}
	if e.cfg.DeleteArchivedAfter > 0 && ctx.Err() == nil {
		e.purgeArchive(ctx, now.Add(-e.cfg.DeleteArchivedAfter))
	}
}

// purgeArchive deletes archived rows archived before before, a batch at a
// time, and logs how many it deleted.
func (e *Engine) purgeArchive(ctx context.Context, before time.Time) {
	var deleted int64
	for e.elector.Leading() {
		n, err := e.drv.PurgeArchive(ctx, before, e.cfg.ArchiveBatch)
		if err != nil {
			if ctx.Err() == nil {
				e.cfg.Logger.Warn("keel: deleting archived tasks failed; next try in one interval",
					"node", e.cfg.Node, "error", err)
			}
			break
		}
		deleted += n
		e.archived.deleted.Add(n)
		if n < int64(e.cfg.ArchiveBatch) || !pause(ctx, archivePause) {
			break
		}
	}
	if deleted > 0 {
		e.cfg.Logger.Info("keel: deleted archived tasks", "node", e.cfg.Node,
			"deleted", deleted, "archived_before", before)
	}
}

// pause waits d and reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
