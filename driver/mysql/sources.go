package mysql

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Broker sources' rejected messages and reports (keel_rejected and
// keel_sources, migration 014). A message's insert is a plain INSERT: a
// stored duplicate fails it with error 1062 (after a concurrent insert of
// the same source and digest committed), which rolls back that statement
// only; the id is then read, and READ COMMITTED sees the committed row.
// Unlike INSERT IGNORE this lets every other error through. Times are
// DATETIME(6) in UTC.

const (
	sqlInsertRejected = `INSERT INTO keel_rejected (` + sqlutil.RejectedInsertColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlListRejected = `SELECT ` + sqlutil.RejectedColumns + ` FROM keel_rejected
WHERE (? = '' OR source = ?) AND (? = 0 OR resubmitted_at IS NULL) AND (? = 0 OR id < ?)
ORDER BY id DESC LIMIT ?`
	sqlReportSource = `INSERT INTO keel_sources (` + sqlutil.SourceColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    kind = VALUES(kind), type = VALUES(type), state = VALUES(state), last_error = VALUES(last_error),
    accepted = VALUES(accepted), duplicate = VALUES(duplicate), rejected = VALUES(rejected), nacked = VALUES(nacked),
    ack_p50_us = VALUES(ack_p50_us), ack_p99_us = VALUES(ack_p99_us),
    started_at = VALUES(started_at), updated_at = VALUES(updated_at)`
)

// timeArg is a time as a DATETIME(6) argument (the connection's zone is
// UTC).
func timeArg(t time.Time) any { return t.UTC() }

var _ driver.SourceStore = (*Driver)(nil)

// sourceSQL are the source statements of sqlutil.Ops.
var sourceSQL = sqlutil.SourceSQL[querier]{ListRejected: sqlListRejected, GetRejected: sqlutil.QGetRejected, Resolve: sqlutil.QResolveRejected,
	Exists: sqlutil.QRejectedExists, DeleteRejected: sqlutil.QDeleteRejected, Report: sqlReportSource, ListSources: sqlutil.QListSourceReport,
	ScanRejected: sqlutil.ScanRejectedUTC, ScanSource: sqlutil.ScanSourceUTC,
	FilterArgs: func(f driver.RejectedFilter) []any {
		a := sqlutil.RejectedFilterArgs(f) // source, open, before, limit
		return []any{a[0], a[0], a[1], a[2], a[2], a[3]}
	},
	InsertRejected: func(ctx context.Context, tx querier, params []driver.RejectedParams) ([]driver.RejectedResult, error) {
		return sqlutil.InsertRejectedSQL(ctx, tx, params, sqlutil.RejectedSQL{
			Insert: sqlInsertRejected, Find: sqlutil.QFindRejected, At: timeArg, Duplicate: isDuplicate,
		})
	},
}
