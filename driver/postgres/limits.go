package postgres

import (
	"context"
	"time"

	"github.com/keelq/keel/driver/internal/sqlutil"
)

// limitSQL are the limited claim's statements of sqlutil.Ops: one
// transaction locks the limits' rows (SELECT … FOR UPDATE, in kind and
// name order). Every limited claim of a limit waits for the one holding
// its row, and commits before it lets the next one count.
func (d *Driver) limitSQL() sqlutil.LimitSQL[querier] {
	return sqlutil.LimitSQL[querier]{Row: d.sql.limitRow, RunningOfType: d.sql.runningOfType, RunningOfQueue: d.sql.runningOfQueue,
		Spend: d.sql.spendTokens,
		Now: func(ctx context.Context, q querier, at time.Time) (now int64, err error) {
			err = q.query(ctx, d.sql.limitNow, []any{d.now(at)}, func(scan func(...any) error) error { return scan(&now) })
			return now, err
		}}
}
