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
	s := sqlutil.WorkflowStatements[querier](sqlutil.WorkflowDialect{Mark: sqlutil.Question, HeldAt: heldAt})
	s.Insert = `INSERT INTO keel_workflows (name, on_failure, created_at) VALUES (?, ?, ?) RETURNING id`
	s.Release = `UPDATE keel_tasks SET run_at = ?1, updated_at = ?1
WHERE id = ?2 AND state = 'pending' AND run_at = ` + heldAt
	s.Cancel = `UPDATE keel_tasks SET state = 'cancelled', finished_at = ?1, updated_at = ?1, errors = ?2
WHERE id = ?3 AND state = 'pending' AND run_at = ` + heldAt
	s.In = func(query string, ids []int64) (string, []any) {
		return strings.Replace(query, "{ids}", "(SELECT value FROM json_each(?))", 1), []any{int64List(ids)}
	}
	s.List = func(f driver.WorkflowFilter) (string, []any) {
		return sqlutil.WorkflowList(`SELECT `+sqlutil.WorkflowColumns+` FROM keel_workflows`, f, sqlutil.Question)
	}
	s.Scan = func(scan sqlutil.Scan) (*driver.WorkflowRow, error) { return sqlutil.ScanWorkflow(scan, fromMicros) }
	s.Task = d.Get
	s.Count = func(ctx context.Context, q querier, t *sqlutil.Tally) error { return count(ctx, q, t) }
	return s
}

var _ driver.Workflows = (*Driver)(nil)
