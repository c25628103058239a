package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// RegisterNode implements driver.Driver.
func (d *Driver) RegisterNode(ctx context.Context, p driver.NodeParams) error {
	queues := p.Queues
	if queues == nil {
		queues = []string{}
	}
	qs, err := json.Marshal(queues)
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	workers, err := sqlutil.WorkersJSON(p.Workers)
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	return d.write(ctx, func(tx querier) error {
		if _, err := tx.ExecContext(ctx, sqlRegisterNode, p.Name, p.Host, p.PID, string(qs),
			micros(p.StartedAt), micros(p.Now), workers, p.Version, p.Running); err != nil {
			return fmt.Errorf("register node: %w", err)
		}
		return nil
	})
}

// ListNodes implements driver.Driver.
func (d *Driver) ListNodes(ctx context.Context) ([]driver.NodeRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.rdb, sqlListNodes), scanNode)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// RemoveNode implements driver.Driver.
func (d *Driver) RemoveNode(ctx context.Context, name string) error {
	return d.write(ctx, func(tx querier) error {
		if _, err := tx.ExecContext(ctx, sqlRemoveNode, name); err != nil {
			return fmt.Errorf("remove node: %w", err)
		}
		return nil
	})
}

// PruneNodes implements driver.Driver.
func (d *Driver) PruneNodes(ctx context.Context, p driver.PruneNodesParams) (int64, error) {
	var n int64
	err := d.write(ctx, func(tx querier) error {
		cutoff := micros(p.Now.Add(-p.OlderThan))
		res, err := tx.ExecContext(ctx, sqlPruneNodes, cutoff)
		if err != nil {
			return fmt.Errorf("prune nodes: %w", err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, sqlPruneSourceReports, cutoff); err != nil {
			return fmt.Errorf("prune source reports: %w", err)
		}
		return nil
	})
	return n, err
}
