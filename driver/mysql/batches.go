package mysql

import (
	"strings"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// batchSQL are the batch statements (sqlutil.BatchSQL). A member's state
// is read through batch_state, the generated column its key holds.
var batchSQL = sqlutil.BatchSQL{
	Insert: `INSERT INTO keel_batches (created_at, sealed_at, on_success, on_finish) VALUES (?, ?, ?, ?)`,
	LastID: `SELECT LAST_INSERT_ID()`,
	Members: func(batch int64, ids []int64) (string, []any) {
		args := make([]any, 0, len(ids)+1)
		args = append(args, batch)
		for _, id := range ids {
			args = append(args, id)
		}
		return `UPDATE keel_tasks SET batch_id = ? WHERE id IN (` + strings.Repeat("?, ", len(ids)-1) + `?)`, args
	},
	Total:   `UPDATE keel_batches SET total = total + ? WHERE id = ?`,
	Lock:    `SELECT id FROM keel_batches WHERE id = ? AND sealed_at IS NULL FOR UPDATE`,
	LockAny: `SELECT ` + sqlutil.BatchColumns + ` FROM keel_batches WHERE id = ? FOR UPDATE`,
	Seal:    `UPDATE keel_batches SET sealed_at = ? WHERE id = ? AND sealed_at IS NULL`,
	Get:     `SELECT ` + sqlutil.BatchColumns + ` FROM keel_batches WHERE id = ?`,
	Counts: `SELECT batch_state, count(*) FROM keel_tasks FORCE INDEX (keel_tasks_batch)
WHERE batch_id = ? GROUP BY batch_state`,
	ArchiveCounts: `SELECT state, count(*) FROM keel_archive WHERE batch_id = ? GROUP BY state`,
	Unfinished: `SELECT id FROM keel_tasks FORCE INDEX (keel_tasks_batch)
WHERE batch_id = ? AND batch_state IN ('pending', 'running') LIMIT 1`,
	LastPending: `SELECT id FROM keel_tasks FORCE INDEX (keel_tasks_batch)
WHERE batch_id = ? AND batch_state = 'pending' ORDER BY id DESC LIMIT 1`,
	Prune: `DELETE FROM keel_batches WHERE finished_at < ? ORDER BY finished_at LIMIT ?`,
	Finish: `UPDATE keel_batches SET finished_at = ?, succeeded = ?, dead = ?, cancelled = ?, on_success_id = ?, on_finish_id = ?
WHERE id = ? AND finished_at IS NULL`,
	Open: `SELECT id FROM keel_batches WHERE unfinished = 1 ORDER BY id LIMIT ?`,
	List: func(f driver.BatchFilter) (string, []any) {
		return sqlutil.BatchList(`SELECT `+sqlutil.BatchColumns+` FROM keel_batches`, f, sqlutil.Question)
	},
	Page: `SELECT ` + taskColumns + ` FROM keel_tasks FORCE INDEX (keel_tasks_batch)
WHERE batch_id = ? AND id > ? ORDER BY id LIMIT ?`,
	Scan:     sqlutil.ScanBatchUTC,
	ScanTask: sqlutil.ScanTaskUTC,
}

var _ driver.Batcher = (*Driver)(nil)
