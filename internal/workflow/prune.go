package workflow

import (
	"context"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
)

// PruneEvery is how often the leader's Pruner runs a pass.
const PruneEvery = time.Minute

// PruneAge is the least age of a workflow a Pruner deletes: its tasks
// are all gone long before (archived, then deleted from the archive), and
// no creation is still committing it.
const PruneAge = time.Hour

// prunePage is how many workflows one PruneWorkflows call looks at;
// prunePages how many calls one pass makes at most (the next pass goes on
// after the last).
const (
	prunePage  = 200
	prunePages = 50
)

// PruneStore is what a Pruner needs of a driver.
type PruneStore interface {
	PruneWorkflows(ctx context.Context, params driver.PruneWorkflowsParams) (last, deleted int64, err error)
}

// PrunerConfig wires a Pruner.
type PrunerConfig struct {
	Store  PruneStore
	Now    func() time.Time
	Logger *slog.Logger
	// Leading gates the passes: only the elected leader runs them. Nil:
	// always.
	Leading func() bool
}

// Pruner deletes the workflows none of whose tasks is stored any more,
// with their task and dependency rows: a workflow is kept as long as one
// of its tasks can be read, in keel_tasks or in the archive. The
// dependency rows of a task outside a workflow go when its wait is
// settled (driver.Workflows.Settle).
type Pruner struct {
	cfg PrunerConfig
	// cursor is where the next pass starts: after the last workflow the
	// previous one looked at; 0 once a pass reached the end.
	cursor int64
}

// NewPruner returns a Pruner.
func NewPruner(cfg PrunerConfig) *Pruner {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Pruner{cfg: cfg}
}

// Run is one pass as an engine loop runs it: while leading, errors logged.
func (p *Pruner) Run(ctx context.Context) {
	if p.cfg.Leading != nil && !p.cfg.Leading() {
		return
	}
	if _, err := p.RunOnce(ctx); err != nil && ctx.Err() == nil {
		p.cfg.Logger.Warn("keel: pruning finished workflows failed; next try in one interval", "error", err)
	}
}

// RunOnce looks at up to prunePages pages of workflows created more than
// PruneAge ago, from where the last pass stopped, and returns how many it
// deleted.
func (p *Pruner) RunOnce(ctx context.Context) (int64, error) {
	before := p.cfg.Now().Add(-PruneAge)
	var total int64
	for range prunePages {
		last, n, err := p.cfg.Store.PruneWorkflows(ctx, driver.PruneWorkflowsParams{After: p.cursor, Before: before, Limit: prunePage})
		if err != nil {
			return total, err
		}
		total += n
		p.cursor = last
		if last == 0 {
			break
		}
	}
	if total > 0 {
		p.cfg.Logger.Info("keel: workflows whose tasks are all gone deleted", "workflows", total)
	}
	return total, nil
}
