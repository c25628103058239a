package sqlite

import (
	"encoding/json"
	"strconv"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// batchSQL are the batch statements (sqlutil.BatchSQL). SQLite's single
// writer serializes every write, so locking a batch is reading it.
var batchSQL = sqlutil.BatchSQL{
	Insert: `INSERT INTO keel_batches (created_at, sealed_at, on_success, on_finish) VALUES (?, ?, ?, ?) RETURNING id`,
	Members: func(batch int64, ids []int64) (string, []any) {
		b, _ := json.Marshal(ids) // a slice of int64 always encodes
		return `UPDATE keel_tasks SET batch_id = ?1 WHERE id IN (SELECT value FROM json_each(?2))`, []any{batch, string(b)}
	},
	Total:         `UPDATE keel_batches SET total = total + ? WHERE id = ?`,
	Lock:          `SELECT id FROM keel_batches WHERE id = ? AND sealed_at IS NULL`,
	LockAny:       `SELECT ` + sqlutil.BatchColumns + ` FROM keel_batches WHERE id = ?`,
	Seal:          `UPDATE keel_batches SET sealed_at = ? WHERE id = ? AND sealed_at IS NULL`,
	Get:           `SELECT ` + sqlutil.BatchColumns + ` FROM keel_batches WHERE id = ?`,
	Counts:        `SELECT state, count(*) FROM keel_tasks INDEXED BY keel_tasks_batch WHERE batch_id = ? GROUP BY state`,
	ArchiveCounts: `SELECT state, count(*) FROM keel_archive WHERE batch_id = ? GROUP BY state`,
	Unfinished: `SELECT id FROM keel_tasks INDEXED BY keel_tasks_batch
WHERE batch_id = ? AND state IN ('pending', 'running') LIMIT 1`,
	LastPending: `SELECT id FROM keel_tasks INDEXED BY keel_tasks_batch
WHERE batch_id = ? AND state = 'pending' ORDER BY id DESC LIMIT 1`,
	Prune: `DELETE FROM keel_batches WHERE id IN (SELECT id FROM keel_batches INDEXED BY keel_batches_finished
WHERE finished_at < ? ORDER BY finished_at LIMIT ?)`,
	Finish: `UPDATE keel_batches SET finished_at = ?, succeeded = ?, dead = ?, cancelled = ?, on_success_id = ?, on_finish_id = ?
WHERE id = ? AND finished_at IS NULL`,
	Open: `SELECT id FROM keel_batches INDEXED BY keel_batches_open
WHERE finished_at IS NULL AND sealed_at IS NOT NULL ORDER BY id LIMIT ?`,
	List: func(f driver.BatchFilter) (string, []any) {
		return sqlutil.BatchList(`SELECT `+sqlutil.BatchColumns+` FROM keel_batches`, f, func(n int) string { return "?" + strconv.Itoa(n) })
	},
	Page: `SELECT ` + taskColumns + ` FROM keel_tasks INDEXED BY keel_tasks_batch
WHERE batch_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3`,
	Scan:     func(scan sqlutil.Scan) (*driver.BatchRow, error) { return sqlutil.ScanBatch(scan, fromMicros, optTime) },
	ScanTask: scanTask,
}

var _ driver.Batcher = (*Driver)(nil)
