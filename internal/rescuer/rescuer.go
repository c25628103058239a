// Package rescuer returns tasks whose worker vanished (lease expired) to
// pending with backoff, or to dead on their last attempt, so a task that
// crashes its worker cannot loop forever. It asks the driver for expired
// leases, has the engine decide each task's fate (Config.Decide, the
// decision function the worker uses too) and tells the driver what to
// write, fenced.
package rescuer

import (
	"context"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/logevent"
	"github.com/keelq/keel/internal/service"
)

// BatchSize is the most expired tasks one pass lists at a time; a full
// batch is followed at once by the next.
const BatchSize = 500

// Store is what a Rescuer needs of a driver.
type Store interface {
	ListExpired(ctx context.Context, params driver.ExpiredParams) ([]driver.TaskRow, time.Time, error)
	Rescue(ctx context.Context, params driver.RescueParams) ([]driver.TaskRow, error)
}

// Config wires a Rescuer.
type Config struct {
	Driver   Store
	Node     string
	Interval time.Duration
	// Clock paces the passes; default Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// Decide returns the transition for a task whose lease expired, judged
	// at now: the attempt failed with outcome lease_expired; retry or dead.
	// A zero transition (ID 0) leaves the task to a later pass.
	Decide func(row *driver.TaskRow, now time.Time) driver.Transition
	// Leading gates the work: only the elected leader rescues.
	Leading func() bool
	// Rescued is told about every task rescued (for wake-ups and metrics).
	Rescued func(rows []driver.TaskRow)
}

// Rescuer is the expired-lease maintenance service.
type Rescuer struct {
	cfg  Config
	clk  service.Clock
	kick chan struct{}
	loop *service.Loop
}

// New returns a Rescuer.
func New(cfg Config) *Rescuer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Rescuer{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now), kick: make(chan struct{}, 1)}
}

// Start runs a rescue pass at once, then every Interval and on every
// Kick, each while leading.
func (r *Rescuer) Start(ctx context.Context) {
	r.loop = service.Start(ctx, func(ctx context.Context) {
		t := r.clk.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for {
			if r.cfg.Leading() {
				r.RunOnce(ctx)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			case <-r.kick:
			}
		}
	})
}

// Kick asks for a pass now rather than at the next Interval. The elector
// calls it when this process becomes the leader, so leases that expired
// while no one led are not left waiting a whole Interval. It never blocks;
// kicks that arrive during a pass make one more pass.
func (r *Rescuer) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Stop stops the service.
func (r *Rescuer) Stop() { r.loop.Stop() }

// RunOnce rescues every expired task, in batches of BatchSize.
func (r *Rescuer) RunOnce(ctx context.Context) {
	for ctx.Err() == nil {
		expired, now, err := r.cfg.Driver.ListExpired(ctx, driver.ExpiredParams{Now: r.clk.Now(), Limit: BatchSize})
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Warn("keel: rescue failed", "error", err)
			}
			return
		}
		if len(expired) == 0 {
			return
		}
		tasks := make([]driver.RescueTask, 0, len(expired))
		for i := range expired {
			if t := r.cfg.Decide(&expired[i], now); t.ID != 0 {
				tasks = append(tasks, driver.RescueTask{Owner: expired[i].LeaseOwner, Transition: t})
			}
		}
		if len(tasks) == 0 {
			return
		}
		rows, err := r.cfg.Driver.Rescue(ctx, driver.RescueParams{Now: now, Tasks: tasks})
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Warn("keel: rescue failed", "error", err)
			}
			return
		}
		for i := range rows {
			r.logRescued(ctx, &rows[i], rowOwner(expired, rows[i].ID))
		}
		if len(rows) > 0 && r.cfg.Rescued != nil {
			r.cfg.Rescued(rows)
		}
		// Tasks listed but not rescued (renewed or finished meanwhile)
		// would be listed again: go on only while passes make progress.
		if len(expired) < BatchSize || len(rows) == 0 {
			return
		}
	}
}

// logRescued logs one rescued task: at WARN when it will be retried, at
// ERROR when it was dead-lettered (its last attempt). node is the worker
// that lost the lease.
func (r *Rescuer) logRescued(ctx context.Context, row *driver.TaskRow, node string) {
	level, msg := slog.LevelWarn, "keel: rescued task whose lease expired, will retry"
	if row.State == driver.StateDead {
		level, msg = slog.LevelError, "keel: task dead-lettered: its lease expired on its last attempt"
	}
	if !r.cfg.Logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.Int64(logevent.TaskID, row.ID), slog.String(logevent.Type, row.Type), slog.String(logevent.Queue, row.Queue),
		slog.Int(logevent.Attempt, row.Attempt), slog.String(logevent.Node, node),
		slog.String(logevent.Outcome, string(driver.OutcomeLeaseExpired)), slog.String(logevent.State, string(row.State)),
		slog.String(logevent.Error, "lease expired: worker lost"),
	}
	if id := logevent.TraceIDFromMeta(row.Meta); id != "" {
		attrs = append(attrs, slog.String(logevent.TraceID, id))
	}
	r.cfg.Logger.LogAttrs(ctx, level, msg, attrs...)
}

func rowOwner(rows []driver.TaskRow, id int64) string {
	for _, r := range rows {
		if r.ID == id {
			return r.LeaseOwner
		}
	}
	return ""
}
