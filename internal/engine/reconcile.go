package engine

import (
	"context"

	"github.com/keelq/keel/driver"
)

// reconcileCounters runs on every process at ReconcileInterval and acts on
// the leader only: it has the driver compare the live counters with the
// task table and correct them, and drop history past HistoryRetention. The
// counters are written in the transaction of every change, so a correction
// means something wrote keel_tasks around keel (a manual UPDATE on a
// database whose driver counts in Go): it is logged.
func (e *Engine) reconcileCounters(ctx context.Context) {
	if !e.elector.Leading() {
		return
	}
	now := e.cfg.Now()
	fixed, err := e.drv.Reconcile(ctx, driver.ReconcileParams{Now: now, MinutesBefore: now.Add(-e.cfg.HistoryRetention)})
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("keel: reconciling the live counters failed; next try in one interval",
				"node", e.cfg.Node, "error", err)
		}
		return
	}
	for _, r := range fixed {
		e.cfg.Logger.Warn("keel: live counter corrected to match the task table",
			"queue", r.Queue, "type", r.Type, "kind", r.Kind, "priority", r.Priority, "due_minute", r.Due, "added", r.N)
	}
}
