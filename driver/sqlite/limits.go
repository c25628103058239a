package sqlite

import (
	"context"
	"time"

	"github.com/keelq/keel/driver/internal/sqlutil"
)

// limitSQL are the limited claim's statements of sqlutil.Ops. The claim
// is one operation of the single writer, whose transaction (BEGIN
// IMMEDIATE) holds the database's write lock against every process from
// its start, so the limits' rows, the count of running tasks and the claim
// are one consistent step; its clock is the params' own.
func (d *Driver) limitSQL() sqlutil.LimitSQL[querier] {
	return sqlutil.LimitSQL[querier]{Row: sqlLimitRow, RunningOfType: sqlRunningOfType, RunningOfQueue: sqlRunningOfQueue,
		Spend: sqlSpendTokens,
		Now:   func(_ context.Context, _ querier, now time.Time) (int64, error) { return micros(now), nil }}
}
