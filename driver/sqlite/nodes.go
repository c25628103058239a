package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelq/keel/driver"
)

// The node registry's SQL (keel_nodes, migration 002). Times are Unix
// microseconds from the engine's clock.

const sqlRegisterNode = `INSERT INTO keel_nodes (name, host, pid, queues, started_at, heartbeat_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
	started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`

const sqlListNodes = `SELECT name, host, pid, queues, started_at, heartbeat_at FROM keel_nodes ORDER BY name`

const sqlRemoveNode = `DELETE FROM keel_nodes WHERE name = ?`

const sqlPruneNodes = `DELETE FROM keel_nodes WHERE heartbeat_at < ?`

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
	return d.write(ctx, func(tx querier) error {
		if _, err := tx.ExecContext(ctx, sqlRegisterNode, p.Name, p.Host, p.PID, string(qs),
			micros(p.StartedAt), micros(p.Now)); err != nil {
			return fmt.Errorf("register node: %w", err)
		}
		return nil
	})
}

// ListNodes implements driver.Driver.
func (d *Driver) ListNodes(ctx context.Context) ([]driver.NodeRow, error) {
	rows, err := d.rdb.QueryContext(ctx, sqlListNodes)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []driver.NodeRow
	for rows.Next() {
		var (
			n              driver.NodeRow
			queues         string
			started, heart int64
		)
		if err := rows.Scan(&n.Name, &n.Host, &n.PID, &queues, &started, &heart); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		if err := json.Unmarshal([]byte(queues), &n.Queues); err != nil {
			return nil, fmt.Errorf("list nodes: queues of %s: %w", n.Name, err)
		}
		n.StartedAt, n.HeartbeatAt = fromMicros(started), fromMicros(heart)
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
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
		res, err := tx.ExecContext(ctx, sqlPruneNodes, micros(p.Now.Add(-p.OlderThan)))
		if err != nil {
			return fmt.Errorf("prune nodes: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
