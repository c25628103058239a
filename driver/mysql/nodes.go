package mysql

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

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

// nodeSQL are the node statements of sqlutil.Ops. The heartbeat time is
// the database's clock (unless Options.CallerClock), like leases;
// StartedAt is the process's own.
func (d *Driver) nodeSQL() sqlutil.NodeSQL {
	return sqlutil.NodeSQL{Register: sqlRegisterNode.text, List: sqlListNodes, Remove: sqlRemoveNode, Scan: scanNode,
		RegisterArgs: func(p driver.NodeParams, queues []string, workers string) []any {
			return sqlRegisterNode.args(d.now(p.Now), p.Name, p.Host, p.PID, sqlutil.JSONStrings(queues), sqlutil.NullTime(p.StartedAt),
				workers, p.Version, p.Running)
		}}
}
