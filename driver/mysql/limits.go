package mysql

import (
	"context"
	"time"

	"github.com/keelq/keel/driver/internal/sqlutil"
)

// limitSQL are the limited claim's statements of sqlutil.Ops: one READ
// COMMITTED transaction locks the limits' rows (a locking read, in kind
// and name order). Every limited claim of a limit waits for the one
// holding its row; each statement after the lock reads what committed
// before it began, so the count includes every claim that held the lock
// before.
func (d *Driver) limitSQL() sqlutil.LimitSQL[querier] {
	return sqlutil.LimitSQL[querier]{Row: sqlLimitRow, RunningOfType: sqlRunningOfType, RunningOfQueue: sqlRunningOfQueue,
		Spend: sqlSpendTokens, SpendKeyLast: true,
		Now: func(ctx context.Context, q querier, now time.Time) (int64, error) {
			var at time.Time
			err := sqlutil.Query(ctx, q, sqlLimitNow.text, sqlLimitNow.args(d.now(now))...)(func(scan sqlutil.Scan) error {
				return scan(&at)
			})
			return at.UnixMicro(), err
		}}
}
