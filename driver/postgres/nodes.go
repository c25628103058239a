package postgres

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// nodeSQL are the node statements of sqlutil.Ops. The heartbeat time is
// the database's clock (unless Options.CallerClock), like leases;
// StartedAt is the process's own.
func (d *Driver) nodeSQL() sqlutil.NodeSQL {
	return sqlutil.NodeSQL{Register: sqlRegisterNode, List: sqlListNodes, Remove: sqlRemoveNode, Scan: scanNode,
		Prune: sqlPruneNodes, PruneCounts: true,
		PruneArgs: func(p driver.PruneNodesParams) ([]any, []any) {
			return []any{d.now(p.Now), p.OlderThan.Microseconds()}, nil
		},
		RegisterArgs: func(p driver.NodeParams, queues []string, workers string) []any {
			return []any{d.now(p.Now), p.Name, p.Host, p.PID, queues, sqlutil.NullTime(p.StartedAt), workers, p.Version, p.Running}
		}}
}
