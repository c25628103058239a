package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// heldAt is driver.HeldUntil as a literal of keel_tasks.run_at.
var heldAt = `'` + driver.HeldUntil.Format("2006-01-02 15:04:05.999999") + `+00'::timestamptz`

// workflowSQL are the statements of task dependencies and workflows
// (sqlutil.WorkflowSQL); {schema} is filled in when they run. The live
// counters follow the releases and cancels through keel_tasks' triggers.
func (d *Driver) workflowSQL() sqlutil.WorkflowSQL[querier] {
	s := sqlutil.WorkflowStatements[querier](sqlutil.WorkflowDialect{Prefix: "{schema}.", Mark: func(n int) string { return "$" + strconv.Itoa(n) }, HeldAt: heldAt,
		LockWait: " FOR UPDATE OF w", LockTask: " FOR UPDATE"})
	s.Insert = `INSERT INTO {schema}.keel_workflows (name, on_failure, created_at) VALUES ($1, $2, $3) RETURNING id`
	s.Release = `UPDATE {schema}.keel_tasks SET run_at = $1, updated_at = $1
WHERE id = $2 AND state = 'pending' AND run_at = ` + heldAt
	s.Cancel = `UPDATE {schema}.keel_tasks SET state = 'cancelled', finished_at = $1, updated_at = $1, errors = $2::jsonb
WHERE id = $3 AND state = 'pending' AND run_at = ` + heldAt
	s.In = func(query string, ids []int64) (string, []any) {
		return strings.Replace(query, "{ids}", "(SELECT unnest($1::bigint[]))", 1), []any{ids}
	}
	s.List = func(f driver.WorkflowFilter) (string, []any) {
		return sqlutil.WorkflowList(`SELECT `+sqlutil.WorkflowColumns+` FROM {schema}.keel_workflows`, f,
			func(n int) string { return "$" + strconv.Itoa(n) })
	}
	s.Scan = sqlutil.ScanWorkflowUTC
	s.Task = d.Get
	return s
}

var _ driver.Workflows = (*Driver)(nil)

// txNow is the database's clock in the transaction q (the caller's now
// under Options.CallerClock): the time of a held task's release.
func (d *Driver) txNow(ctx context.Context, q querier, now time.Time) (time.Time, error) {
	if d.opts.CallerClock {
		return now, nil
	}
	var t time.Time
	err := rowsOf(ctx, q, `SELECT now()`)(func(scan sqlutil.Scan) error { return scan(&t) })
	if err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return t.UTC(), nil
}
