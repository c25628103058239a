package mysql

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/keelq/keel/driver"
)

// The node registry's SQL (keel_nodes, migration 002). Like the task
// queries, every statement starts from one now: the caller's clock or the
// database's UTC_TIMESTAMP(6).

var sqlRegisterNode = prepare(`INSERT INTO keel_nodes (name, host, pid, queues, started_at, heartbeat_at)
VALUES (?, ?, ?, ?, COALESCE(?, {now}), {now})
ON DUPLICATE KEY UPDATE host = VALUES(host), pid = VALUES(pid), queues = VALUES(queues),
	started_at = VALUES(started_at), heartbeat_at = VALUES(heartbeat_at)`)

const sqlListNodes = `SELECT name, host, pid, queues, started_at, heartbeat_at FROM keel_nodes ORDER BY name`

const sqlRemoveNode = `DELETE FROM keel_nodes WHERE name = ?`

var sqlPruneNodes = prepare(`DELETE FROM keel_nodes WHERE heartbeat_at < TIMESTAMPADD(MICROSECOND, -?, {now})`)

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
	err = d.retry(ctx, func() error {
		_, err := d.db.ExecContext(ctx, sqlRegisterNode.text,
			sqlRegisterNode.args(d.now(p.Now), p.Name, p.Host, p.PID, string(qs), started)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	return nil
}

// ListNodes implements driver.Driver.
func (d *Driver) ListNodes(ctx context.Context) ([]driver.NodeRow, error) {
	rows, err := d.db.QueryContext(ctx, sqlListNodes)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []driver.NodeRow
	for rows.Next() {
		var n driver.NodeRow
		var qs []byte
		if err := rows.Scan(&n.Name, &n.Host, &n.PID, &qs, &n.StartedAt, &n.HeartbeatAt); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		if err := json.Unmarshal(qs, &n.Queues); err != nil {
			return nil, fmt.Errorf("list nodes: node %s: decode queues: %w", n.Name, err)
		}
		n.StartedAt, n.HeartbeatAt = n.StartedAt.UTC(), n.HeartbeatAt.UTC()
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
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
	return n, nil
}
