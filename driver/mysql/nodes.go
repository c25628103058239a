package mysql

import (
	"context"
	"encoding/json"
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
	qs, err := json.Marshal(queues)
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	var started any
	if !p.StartedAt.IsZero() {
		started = p.StartedAt
	}
	workers, err := sqlutil.WorkersJSON(p.Workers)
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	err = d.retry(ctx, func() error {
		_, err := d.db.ExecContext(ctx, sqlRegisterNode.text,
			sqlRegisterNode.args(d.now(p.Now), p.Name, p.Host, p.PID, string(qs), started, workers, p.Version, p.Running)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	return nil
}

// ListNodes implements driver.Driver.
func (d *Driver) ListNodes(ctx context.Context) ([]driver.NodeRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlListNodes), scanNode)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// RemoveNode implements driver.Driver.
func (d *Driver) RemoveNode(ctx context.Context, name string) error {
	err := d.retry(ctx, func() error {
		_, err := d.db.ExecContext(ctx, sqlRemoveNode, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("remove node: %w", err)
	}
	return nil
}

// PruneNodes implements driver.Driver.
func (d *Driver) PruneNodes(ctx context.Context, p driver.PruneNodesParams) (int64, error) {
	var n int64
	err := d.retry(ctx, func() error {
		res, err := d.db.ExecContext(ctx, sqlPruneNodes.text, sqlPruneNodes.args(d.now(p.Now), p.OlderThan.Microseconds())...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune nodes: %w", err)
	}
	us := p.OlderThan.Microseconds()
	err = d.retry(ctx, func() error {
		_, err := d.db.ExecContext(ctx, sqlPruneSourceReports.text, sqlPruneSourceReports.args(d.now(p.Now), us, us)...)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("prune source reports: %w", err)
	}
	return n, nil
}
