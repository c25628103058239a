package postgres

import (
	"strconv"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// batchSQL are the batch statements (sqlutil.BatchSQL); {schema} is
// filled in when they run.
var batchSQL = sqlutil.BatchSQL{
	Insert: `INSERT INTO {schema}.keel_batches (created_at, sealed_at, on_success, on_finish)
VALUES ($1, $2, $3::jsonb, $4::jsonb) RETURNING id`,
	Members: func(batch int64, ids []int64) (string, []any) {
		return `UPDATE {schema}.keel_tasks SET batch_id = $1 WHERE id = ANY($2::bigint[])`, []any{batch, ids}
	},
	Total:         `UPDATE {schema}.keel_batches SET total = total + $1 WHERE id = $2`,
	Lock:          `SELECT id FROM {schema}.keel_batches WHERE id = $1 AND sealed_at IS NULL FOR UPDATE`,
	LockAny:       `SELECT ` + sqlutil.BatchColumns + ` FROM {schema}.keel_batches WHERE id = $1 FOR UPDATE`,
	Seal:          `UPDATE {schema}.keel_batches SET sealed_at = $1 WHERE id = $2 AND sealed_at IS NULL`,
	Get:           `SELECT ` + sqlutil.BatchColumns + ` FROM {schema}.keel_batches WHERE id = $1`,
	Counts:        `SELECT state, count(*) FROM {schema}.keel_tasks WHERE batch_id = $1 GROUP BY state`,
	ArchiveCounts: `SELECT state, count(*) FROM {schema}.keel_archive WHERE batch_id = $1 GROUP BY state`,
	Unfinished: `SELECT id FROM {schema}.keel_tasks
WHERE batch_id = $1 AND state IN ('pending', 'running') LIMIT 1`,
	LastPending: `SELECT id FROM {schema}.keel_tasks
WHERE batch_id = $1 AND state = 'pending' ORDER BY id DESC LIMIT 1`,
	Prune: `DELETE FROM {schema}.keel_batches WHERE id IN (SELECT id FROM {schema}.keel_batches
WHERE finished_at < $1 ORDER BY finished_at LIMIT $2)`,
	Finish: `UPDATE {schema}.keel_batches SET finished_at = $1, succeeded = $2, dead = $3, cancelled = $4,
	on_success_id = $5, on_finish_id = $6
WHERE id = $7 AND finished_at IS NULL`,
	Open: `SELECT id FROM {schema}.keel_batches
WHERE finished_at IS NULL AND sealed_at IS NOT NULL ORDER BY id LIMIT $1`,
	List: func(f driver.BatchFilter) (string, []any) {
		return sqlutil.BatchList(`SELECT `+sqlutil.BatchColumns+` FROM {schema}.keel_batches`, f, func(n int) string { return "$" + strconv.Itoa(n) })
	},
	Page: `SELECT ` + taskColumns + ` FROM {schema}.keel_tasks
WHERE batch_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
	Scan:     sqlutil.ScanBatchUTC,
	ScanTask: sqlutil.ScanTaskUTC,
}

var _ driver.Batcher = (*Driver)(nil)
