package postgres

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// PruneNodes implements driver.Driver.
func (d *Driver) PruneNodes(ctx context.Context, p driver.PruneNodesParams) (int64, error) {
	var n int64
	if err := d.pool.QueryRow(ctx, d.q(sqlPruneNodes), d.now(p.Now), p.OlderThan.Microseconds()).Scan(&n); err != nil {
		return 0, fmt.Errorf("prune nodes: %w", unavailable(ctx, err))
	}
	return n, nil
}

// nodeSQL are the node statements of sqlutil.Ops. The heartbeat time is
// the database's clock (unless Options.CallerClock), like leases;
// StartedAt is the process's own.
func (d *Driver) nodeSQL() sqlutil.NodeSQL {
	return sqlutil.NodeSQL{Register: sqlRegisterNode, List: sqlListNodes, Remove: sqlRemoveNode, Scan: scanNode,
		RegisterArgs: func(p driver.NodeParams, queues []string, workers string) []any {
			return []any{d.now(p.Now), p.Name, p.Host, p.PID, queues, sqlutil.NullTime(p.StartedAt), workers, p.Version, p.Running}
		}}
}
