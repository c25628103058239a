package postgres

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
)

// The node registry's SQL (keel_nodes, migration 002). Like the task
// queries, every statement starts from one now: $1 with the caller's clock,
// else the database's now(). The registry is written once per heartbeat per
// process, so the schema is put in at each call.

const sqlRegisterNode = nowCTE + `INSERT INTO {schema}.keel_nodes AS n (name, host, pid, queues, started_at, heartbeat_at)
SELECT $2, $3, $4, $5, coalesce($6::timestamptz, t.now), t.now FROM t
ON CONFLICT (name) DO UPDATE SET host = excluded.host, pid = excluded.pid, queues = excluded.queues,
	started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`

const sqlListNodes = `SELECT name, host, pid, queues, started_at, heartbeat_at FROM {schema}.keel_nodes ORDER BY name`

const sqlRemoveNode = `DELETE FROM {schema}.keel_nodes WHERE name = $1`

const sqlPruneNodes = nowCTE + `DELETE FROM {schema}.keel_nodes n USING t
WHERE n.heartbeat_at < t.now - $2 * interval '1 microsecond'`

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
	if _, err := d.pool.Exec(ctx, d.q(sqlRegisterNode), d.now(p.Now), p.Name, p.Host, p.PID, queues, started); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	return nil
}

// ListNodes implements driver.Driver.
func (d *Driver) ListNodes(ctx context.Context) ([]driver.NodeRow, error) {
	var out []driver.NodeRow
	err := pgxQuerier{db: d.pool}.query(ctx, d.q(sqlListNodes), nil, func(scan func(...any) error) error {
		var n driver.NodeRow
		if err := scan(&n.Name, &n.Host, &n.PID, &n.Queues, &n.StartedAt, &n.HeartbeatAt); err != nil {
			return err
		}
		n.StartedAt, n.HeartbeatAt = n.StartedAt.UTC(), n.HeartbeatAt.UTC()
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// RemoveNode implements driver.Driver.
func (d *Driver) RemoveNode(ctx context.Context, name string) error {
	if _, err := d.pool.Exec(ctx, d.q(sqlRemoveNode), name); err != nil {
		return fmt.Errorf("remove node: %w", err)
	}
	return nil
}

// PruneNodes implements driver.Driver.
func (d *Driver) PruneNodes(ctx context.Context, p driver.PruneNodesParams) (int64, error) {
	tag, err := d.pool.Exec(ctx, d.q(sqlPruneNodes), d.now(p.Now), p.OlderThan.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("prune nodes: %w", err)
	}
	return tag.RowsAffected(), nil
}
