package postgres

import (
	"context"
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
	return sqlutil.WorkflowSQL[querier]{
		Insert: `INSERT INTO {schema}.keel_workflows (name, on_failure, created_at) VALUES ($1, $2, $3) RETURNING id`,
		Member: `INSERT INTO {schema}.keel_workflow_tasks (workflow_id, name, task_id) VALUES ($1, $2, $3)`,
		Dep:    `INSERT INTO {schema}.keel_deps (task_id, dep_id) VALUES ($1, $2)`,
		Wait:   `INSERT INTO {schema}.keel_waits (task_id, on_failure, created_at) VALUES ($1, $2, $3)`,
		Live:   `SELECT id FROM {schema}.keel_tasks WHERE id IN {ids}`,
		Get:    `SELECT ` + sqlutil.WorkflowColumns + ` FROM {schema}.keel_workflows WHERE id = $1`,
		Of: `SELECT w.id, w.name, w.on_failure, w.created_at FROM {schema}.keel_workflow_tasks wt
JOIN {schema}.keel_workflows w ON w.id = wt.workflow_id WHERE wt.task_id = $1`,
		Members: `SELECT name, task_id FROM {schema}.keel_workflow_tasks WHERE workflow_id = $1 ORDER BY task_id`,
		Deps: `SELECT d.task_id, d.dep_id, coalesce(t.state, a.state, ''), coalesce(wt.name, '')
FROM {schema}.keel_deps d
LEFT JOIN {schema}.keel_tasks t ON t.id = d.dep_id
LEFT JOIN {schema}.keel_archive a ON a.id = d.dep_id
LEFT JOIN {schema}.keel_workflow_tasks wt ON wt.task_id = d.dep_id
WHERE d.task_id IN {ids}`,
		Waits:    waitSelect + ` WHERE w.task_id > $1 ORDER BY w.task_id LIMIT $2`,
		LockWait: waitSelect + ` WHERE w.task_id = $1 FOR UPDATE OF w`,
		Counted: `SELECT queue, type, priority, attempt FROM {schema}.keel_tasks
WHERE id = $1 AND state = 'pending' AND run_at = ` + heldAt + ` FOR UPDATE`,
		Release: `UPDATE {schema}.keel_tasks SET run_at = $1, updated_at = $1
WHERE id = $2 AND state = 'pending' AND run_at = ` + heldAt,
		Cancel: `UPDATE {schema}.keel_tasks SET state = 'cancelled', finished_at = $1, updated_at = $1, errors = $2::jsonb
WHERE id = $3 AND state = 'pending' AND run_at = ` + heldAt,
		Hold:     `UPDATE {schema}.keel_tasks SET run_at = ` + heldAt + ` WHERE id = $1`,
		DropWait: `DELETE FROM {schema}.keel_waits WHERE task_id = $1`,
		In: func(query string, ids []int64) (string, []any) {
			return strings.Replace(query, "{ids}", "(SELECT unnest($1::bigint[]))", 1), []any{ids}
		},
		List: func(f driver.WorkflowFilter) (string, []any) {
			return sqlutil.WorkflowList(`SELECT `+sqlutil.WorkflowColumns+` FROM {schema}.keel_workflows`, f,
				func(n int) string { return "$" + strconv.Itoa(n) })
		},
		Scan: sqlutil.ScanWorkflowUTC,
		Task: d.Get,
		Now: func(ctx context.Context, q querier, now time.Time) (time.Time, error) {
			if d.opts.CallerClock {
				return now, nil
			}
			var t time.Time
			err := rowsOf(ctx, q, `SELECT now()`)(func(scan sqlutil.Scan) error { return scan(&t) })
			return t, err
		},
	}
}

// waitSelect reads wait rows with their task's state and whether it is
// held.
var waitSelect = `SELECT w.task_id, w.on_failure, coalesce(t.state, ''),
	CASE WHEN t.state = 'pending' AND t.run_at = ` + heldAt + ` THEN 1 ELSE 0 END
FROM {schema}.keel_waits w LEFT JOIN {schema}.keel_tasks t ON t.id = w.task_id`

var _ driver.Workflows = (*Driver)(nil)
