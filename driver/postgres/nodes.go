package postgres

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// RegisterNode implements driver.Driver. The heartbeat time is the
// database's clock (unless Options.CallerClock), like leases; StartedAt is
// the process's own.
func (d *Driver) RegisterNode(ctx context.Context, p driver.NodeParams) error {
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	var started any
	if !p.StartedAt.IsZero() {
		started = p.StartedAt
	}
	workers, err := sqlutil.WorkersJSON(p.Workers)
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	if _, err := d.pool.Exec(ctx, d.q(sqlRegisterNode), d.now(p.Now), p.Name, p.Host, p.PID, queues, started, workers, p.Version, p.Running); err != nil {
		return fmt.Errorf("register node: %w", unavailable(ctx, err))
	}
	return nil
}

// ListNodes implements driver.Driver.
func (d *Driver) ListNodes(ctx context.Context) ([]driver.NodeRow, error) {
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.q(sqlListNodes)), scanNode)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// RemoveNode implements driver.Driver.
func (d *Driver) RemoveNode(ctx context.Context, name string) error {
	if _, err := d.pool.Exec(ctx, d.q(sqlRemoveNode), name); err != nil {
		return fmt.Errorf("remove node: %w", unavailable(ctx, err))
	}
	return nil
}

// PruneNodes implements driver.Driver.
func (d *Driver) PruneNodes(ctx context.Context, p driver.PruneNodesParams) (int64, error) {
	var n int64
	if err := d.pool.QueryRow(ctx, d.q(sqlPruneNodes), d.now(p.Now), p.OlderThan.Microseconds()).Scan(&n); err != nil {
		return 0, fmt.Errorf("prune nodes: %w", unavailable(ctx, err))
	}
	return n, nil
}
