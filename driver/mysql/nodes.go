package mysql

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// nodeSQL are the node statements of sqlutil.Ops. The heartbeat time is
// the database's clock (unless Options.CallerClock), like leases;
// StartedAt is the process's own.
func (d *Driver) nodeSQL() sqlutil.NodeSQL {
	return sqlutil.NodeSQL{Register: sqlRegisterNode.text, List: sqlListNodes, Remove: sqlRemoveNode, Scan: scanNode,
		Prune: sqlPruneNodes.text, PruneSources: sqlPruneSourceReports.text,
		PruneArgs: func(p driver.PruneNodesParams) ([]any, []any) {
			now, us := d.now(p.Now), p.OlderThan.Microseconds()
			return sqlPruneNodes.args(now, us), sqlPruneSourceReports.args(now, us, us)
		},
		RegisterArgs: func(p driver.NodeParams, queues []string, workers string) []any {
			return sqlRegisterNode.args(d.now(p.Now), p.Name, p.Host, p.PID, sqlutil.JSONStrings(queues), sqlutil.NullTime(p.StartedAt),
				workers, p.Version, p.Running)
		}}
}
