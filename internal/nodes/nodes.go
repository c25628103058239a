// Package nodes keeps this process's row in the node registry fresh, one
// write per heartbeat interval, and, while this process leads, removes the
// rows of nodes that stopped heartbeating (crashed or cut off).
package nodes

import (
	"context"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// StaleAfter is how many lease TTLs a node may go without a heartbeat
// before the leader removes its row.
const StaleAfter = 3

// Registry is what a Registrar needs of a driver.
type Registry interface {
	RegisterNode(ctx context.Context, params driver.NodeParams) error
	RemoveNode(ctx context.Context, name string) error
	PruneNodes(ctx context.Context, params driver.PruneNodesParams) (int64, error)
}

// Config wires a Registrar.
type Config struct {
	Driver   Registry
	Node     driver.NodeParams // Name, Host, PID, Queues, StartedAt; Now is set per write
	Interval time.Duration     // refresh (and prune) interval: the heartbeat interval
	LeaseTTL time.Duration     // nodes silent for StaleAfter × LeaseTTL are pruned
	// Clock paces the refreshes; default Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// Leading gates pruning: only the elected leader prunes.
	Leading func() bool
	// Running, when set, counts the tasks the process runs, written with
	// each refresh.
	Running func() int
}

// Registrar is the node-registry service.
type Registrar struct {
	cfg  Config
	clk  service.Clock
	loop *service.Loop
}

// New returns a Registrar.
func New(cfg Config) *Registrar {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Registrar{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now)}
}

// Start registers the node at once, then refreshes it (and prunes stale
// nodes while leading) every Interval.
func (r *Registrar) Start(ctx context.Context) {
	r.loop = service.Start(ctx, func(ctx context.Context) {
		service.EveryOn(ctx, r.clk, r.cfg.Interval, r.RunOnce)
	})
}

// RunOnce refreshes this node's row and, while leading, prunes stale nodes.
func (r *Registrar) RunOnce(ctx context.Context) {
	p := r.cfg.Node
	p.Now = r.clk.Now()
	if r.cfg.Running != nil {
		p.Running = r.cfg.Running()
	}
	// The refresh is not abandoned when Stop cancels ctx: a statement cut
	// off client-side can still commit on the server after Stop's
	// RemoveNode, putting the stopped node back. It is bounded instead.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	err := r.cfg.Driver.RegisterNode(rctx, p)
	cancel()
	if err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("keel: node registry refresh failed", "node", p.Name, "error", err)
	}
	if !r.cfg.Leading() {
		return
	}
	n, err := r.cfg.Driver.PruneNodes(ctx, driver.PruneNodesParams{Now: r.clk.Now(), OlderThan: StaleAfter * r.cfg.LeaseTTL})
	switch {
	case err != nil && ctx.Err() == nil:
		r.cfg.Logger.Warn("keel: pruning stale nodes failed", "error", err)
	case n > 0:
		r.cfg.Logger.Info("keel: removed stale nodes", "count", n)
	}
}

// Stop stops the service and removes this node's row, so operators no
// longer see a node that stopped gracefully.
func (r *Registrar) Stop() {
	r.loop.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.cfg.Driver.RemoveNode(ctx, r.cfg.Node.Name); err != nil {
		r.cfg.Logger.Warn("keel: removing node from the registry failed", "node", r.cfg.Node.Name, "error", err)
	}
}
