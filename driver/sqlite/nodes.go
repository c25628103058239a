package sqlite

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// nodeSQL are the node statements of sqlutil.Ops.
func (d *Driver) nodeSQL() sqlutil.NodeSQL {
	return sqlutil.NodeSQL{Register: sqlRegisterNode, List: sqlListNodes, Remove: sqlRemoveNode, Scan: scanNode,
		Prune: sqlPruneNodes, PruneSources: sqlPruneSourceReports,
		PruneArgs: func(p driver.PruneNodesParams) ([]any, []any) {
			cutoff := []any{micros(p.Now.Add(-p.OlderThan))}
			return cutoff, cutoff
		},
		RegisterArgs: func(p driver.NodeParams, queues []string, workers string) []any {
			return []any{p.Name, p.Host, p.PID, sqlutil.JSONStrings(queues), micros(p.StartedAt), micros(p.Now), workers, p.Version, p.Running}
		}}
}
