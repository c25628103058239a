// Package rescuer returns tasks whose worker vanished (lease expired) to
// pending with backoff, or to dead on their last attempt, so a task that
// crashes its worker cannot loop forever.
package rescuer

import (
	"context"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Config wires a Rescuer.
type Config struct {
	Driver   driver.Driver
	Node     string
	Interval time.Duration
	Now      func() time.Time
	Logger   *slog.Logger
	Backoff  func(taskType string, attempt int) time.Duration
	// Leading gates the work: only the elected leader rescues.
	Leading func() bool
	// Rescued is told about every task rescued (for wake-ups and metrics).
	Rescued func(rows []driver.TaskRow)
}

// Rescuer is the expired-lease maintenance service.
type Rescuer struct {
	cfg  Config
	loop *service.Loop
}

// New returns a Rescuer.
func New(cfg Config) *Rescuer { return &Rescuer{cfg: cfg} }

// Start runs a rescue pass every Interval while leading.
func (r *Rescuer) Start(ctx context.Context) {
	r.loop = service.Start(ctx, func(ctx context.Context) {
		service.Every(ctx, r.cfg.Interval, func(ctx context.Context) {
			if r.cfg.Leading() {
				r.RunOnce(ctx)
			}
		})
	})
}

// Stop stops the service.
func (r *Rescuer) Stop() { r.loop.Stop() }

// RunOnce rescues every expired task, in batches of 500.
func (r *Rescuer) RunOnce(ctx context.Context) {
	for ctx.Err() == nil {
		rows, err := r.cfg.Driver.Rescue(ctx, driver.RescueParams{
			Now: r.cfg.Now(), Limit: 500, Backoff: r.cfg.Backoff, Node: r.cfg.Node,
		})
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Warn("keel: rescue failed", "error", err)
			}
			return
		}
		for _, row := range rows {
			r.cfg.Logger.Warn("keel: rescued task whose lease expired", "task_id", row.ID, "type", row.Type,
				"queue", row.Queue, "attempt", row.Attempt, "state", row.State)
		}
		if len(rows) > 0 && r.cfg.Rescued != nil {
			r.cfg.Rescued(rows)
		}
		if len(rows) < 500 {
			return
		}
	}
}
