package mysql

import (
	"context"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// byID makes a statement on keel_tasks go through its primary key.
const byID = " FORCE INDEX (PRIMARY)"

// heldAt is driver.HeldUntil as a literal of keel_tasks.run_at.
var heldAt = `TIMESTAMP'` + driver.HeldUntil.Format("2006-01-02 15:04:05.999999") + `'`

// workflowSQL are the statements of task dependencies and workflows
// (sqlutil.WorkflowSQL).
func (d *Driver) workflowSQL() sqlutil.WorkflowSQL[querier] {
	// The held task is read, released and cancelled through the primary
	// key, as a sequence member is (sequenceSQL.ByID): the leader's
	// transaction then takes no locks in keel_tasks_state that a claim
	// could be waiting behind.
	s := sqlutil.WorkflowStatements[querier](sqlutil.WorkflowDialect{Mark: sqlutil.Question, HeldAt: heldAt,
		LockWait: " FOR UPDATE", LockTask: " FOR UPDATE", ByID: byID})
	s.Insert = `INSERT INTO keel_workflows (name, on_failure, created_at) VALUES (?, ?, ?)`
	s.LastID = `SELECT LAST_INSERT_ID()`
	s.Release = `UPDATE keel_tasks` + byID + ` SET run_at = ?, updated_at = run_at
WHERE id = ? AND state = 'pending' AND run_at = ` + heldAt
	s.Cancel = `UPDATE keel_tasks` + byID + ` SET state = 'cancelled', finished_at = ?, updated_at = finished_at, errors = ?
WHERE id = ? AND state = 'pending' AND run_at = ` + heldAt
	s.In = sqlutil.InQuestion
	s.List = func(f driver.WorkflowFilter) (string, []any) {
		return sqlutil.WorkflowList(`SELECT `+sqlutil.WorkflowColumns+` FROM keel_workflows`, f, sqlutil.Question)
	}
	s.Scan = sqlutil.ScanWorkflowUTC
	s.Task = d.Get
	s.Count = func(ctx context.Context, q querier, t *sqlutil.Tally) error { return count(ctx, q, t) }
	return s
}

var _ driver.Workflows = (*Driver)(nil)
