package sqlite

import (
	"context"
	"strconv"
	"strings"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// heldAt is driver.HeldUntil as keel_tasks.run_at stores it.
var heldAt = strconv.FormatInt(micros(driver.HeldUntil), 10)

// workflowSQL are the statements of task dependencies and workflows
// (sqlutil.WorkflowSQL). SQLite's single writer serializes every write, so
// locking a row is reading it.
func (d *Driver) workflowSQL() sqlutil.WorkflowSQL[querier] {
	return sqlutil.WorkflowSQL[querier]{
		Insert: `INSERT INTO keel_workflows (name, on_failure, created_at) VALUES (?, ?, ?) RETURNING id`,
		Member: `INSERT INTO keel_workflow_tasks (workflow_id, name, task_id) VALUES (?, ?, ?)`,
		Dep:    `INSERT INTO keel_deps (task_id, dep_id) VALUES (?, ?)`,
		Wait:   `INSERT INTO keel_waits (task_id, on_failure, created_at) VALUES (?, ?, ?)`,
		Live:   `SELECT id FROM keel_tasks WHERE id IN {ids}`,
		Get:    `SELECT ` + sqlutil.WorkflowColumns + ` FROM keel_workflows WHERE id = ?`,
		Of: `SELECT w.id, w.name, w.on_failure, w.created_at FROM keel_workflow_tasks wt
JOIN keel_workflows w ON w.id = wt.workflow_id WHERE wt.task_id = ?`,
		Members: `SELECT name, task_id FROM keel_workflow_tasks WHERE workflow_id = ? ORDER BY task_id`,
		Deps: `SELECT d.task_id, d.dep_id, coalesce(t.state, a.state, ''), coalesce(wt.name, '')
FROM keel_deps d
LEFT JOIN keel_tasks t ON t.id = d.dep_id
LEFT JOIN keel_archive a ON a.id = d.dep_id
LEFT JOIN keel_workflow_tasks wt ON wt.task_id = d.dep_id
WHERE d.task_id IN {ids}`,
		Waits:    waitSelect + ` WHERE w.task_id > ? ORDER BY w.task_id LIMIT ?`,
		LockWait: waitSelect + ` WHERE w.task_id = ?`,
		Counted: `SELECT queue, type, priority, attempt FROM keel_tasks
WHERE id = ? AND state = 'pending' AND run_at = ` + heldAt,
		Release: `UPDATE keel_tasks SET run_at = ?1, updated_at = ?1
WHERE id = ?2 AND state = 'pending' AND run_at = ` + heldAt,
		Cancel: `UPDATE keel_tasks SET state = 'cancelled', finished_at = ?1, updated_at = ?1, errors = ?2
WHERE id = ?3 AND state = 'pending' AND run_at = ` + heldAt,
		Hold:     `UPDATE keel_tasks SET run_at = ` + heldAt + ` WHERE id = ?`,
		DropWait: `DELETE FROM keel_waits WHERE task_id = ?`,
		In: func(query string, ids []int64) (string, []any) {
			return strings.Replace(query, "{ids}", "(SELECT value FROM json_each(?))", 1), []any{int64List(ids)}
		},
		List: func(f driver.WorkflowFilter) (string, []any) {
			return sqlutil.WorkflowList(`SELECT `+sqlutil.WorkflowColumns+` FROM keel_workflows`, f, sqlutil.Question)
		},
		Scan:  func(scan sqlutil.Scan) (*driver.WorkflowRow, error) { return sqlutil.ScanWorkflow(scan, fromMicros) },
		Task:  d.Get,
		Count: func(ctx context.Context, q querier, t *sqlutil.Tally) error { return count(ctx, q, t) },
	}
}

// waitSelect reads wait rows with their task's state and whether it is
// held.
var waitSelect = `SELECT w.task_id, w.on_failure, coalesce(t.state, ''),
	CASE WHEN t.state = 'pending' AND t.run_at = ` + heldAt + ` THEN 1 ELSE 0 END
FROM keel_waits w LEFT JOIN keel_tasks t ON t.id = w.task_id`

var _ driver.Workflows = (*Driver)(nil)
