package engine

import (
	"context"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// maintainer is the leader's upkeep of the database: with a driver that is
// a driver.Maintainer, every MaintainInterval and whenever this process
// becomes the leader, the leader asks the driver to maintain the task table
// (on PostgreSQL, a vacuum where autovacuum does not do it). Other
// processes and other drivers do nothing.
type maintainer struct {
	loop *service.Loop
	kick chan struct{}
}

func (e *Engine) startMaintainer(ctx context.Context) {
	m, ok := e.drv.(driver.Maintainer)
	e.maintainer.kick = make(chan struct{}, 1)
	if !ok || e.cfg.MaintainInterval <= 0 {
		return
	}
	e.maintainer.loop = service.Start(ctx, func(ctx context.Context) {
		t := service.Real(e.cfg.Now).NewTicker(e.cfg.MaintainInterval)
		defer t.Stop()
		for {
			if e.elector.Leading() {
				e.maintain(ctx, m)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			case <-e.maintainer.kick:
			}
		}
	})
}

// kickMaintainer asks for a pass now; it never blocks.
func (e *Engine) kickMaintainer() {
	select {
	case e.maintainer.kick <- struct{}{}:
	default:
	}
}

// maintain runs one pass and logs a vacuum (INFO) or a failure (WARN).
func (e *Engine) maintain(ctx context.Context, m driver.Maintainer) {
	r, err := m.Maintain(ctx)
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("keel: maintaining the task table failed; next try in one interval",
				"node", e.cfg.Node, "error", err)
		}
		return
	}
	if r.Vacuumed {
		e.cfg.Logger.Info("keel: vacuumed the task table", "node", e.cfg.Node, "reason", r.Reason,
			"dead_rows", r.DeadRows, "live_rows", r.LiveRows, "threshold", r.Threshold, "took_ms", r.Took.Milliseconds())
	}
}
