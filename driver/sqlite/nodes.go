package sqlite

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

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

// nodeSQL are the node statements of sqlutil.Ops.
func (d *Driver) nodeSQL() sqlutil.NodeSQL {
	return sqlutil.NodeSQL{Register: sqlRegisterNode, List: sqlListNodes, Remove: sqlRemoveNode, Scan: scanNode,
		RegisterArgs: func(p driver.NodeParams, queues []string, workers string) []any {
			return []any{p.Name, p.Host, p.PID, sqlutil.JSONStrings(queues), micros(p.StartedAt), micros(p.Now), workers, p.Version, p.Running}
		}}
}
