package sqlite

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Broker sources' rejected messages and reports (keel_rejected and
// keel_sources, migration 014). Writes go through the single writer, so
// concurrent inserts of one message meet the unique (source, digest)
// index one after the other.

const (
	sqlInsertRejected = `INSERT INTO keel_rejected (` + sqlutil.RejectedInsertColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (source, digest) DO NOTHING`
	sqlListRejected = `SELECT ` + sqlutil.RejectedColumns + ` FROM keel_rejected
WHERE (?1 = '' OR source = ?1) AND (?2 = 0 OR resubmitted_at IS NULL) AND (?3 = 0 OR id < ?3)
ORDER BY id DESC LIMIT ?4`
	sqlReportSource = `INSERT INTO keel_sources (` + sqlutil.SourceColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, node) DO UPDATE SET
    kind = excluded.kind, type = excluded.type, state = excluded.state, last_error = excluded.last_error,
    accepted = excluded.accepted, duplicate = excluded.duplicate, rejected = excluded.rejected, nacked = excluded.nacked,
    ack_p50_us = excluded.ack_p50_us, ack_p99_us = excluded.ack_p99_us,
    started_at = excluded.started_at, updated_at = excluded.updated_at`
)

// microsArg is a time as SQLite stores it.
func microsArg(t time.Time) any { return micros(t) }

func scanRejected(scan sqlutil.Scan) (*driver.RejectedRow, error) {
	return sqlutil.ScanRejected(scan, fromMicros, optTime)
}

func scanSource(scan sqlutil.Scan) (*driver.SourceRow, error) {
	return sqlutil.ScanSource(scan, fromMicros)
}

var _ driver.SourceStore = (*Driver)(nil)

// sourceSQL are the source statements of sqlutil.Ops.
var sourceSQL = sqlutil.SourceSQL[querier]{ListRejected: sqlListRejected, GetRejected: sqlutil.QGetRejected, Resolve: sqlutil.QResolveRejected,
	Exists: sqlutil.QRejectedExists, DeleteRejected: sqlutil.QDeleteRejected, Report: sqlReportSource, ListSources: sqlutil.QListSourceReport,
	ScanRejected: scanRejected, ScanSource: scanSource,
	InsertRejected: func(ctx context.Context, tx querier, params []driver.RejectedParams) ([]driver.RejectedResult, error) {
		return sqlutil.InsertRejectedSQL(ctx, tx, params, sqlutil.RejectedSQL{
			Insert: sqlInsertRejected, Find: sqlutil.QFindRejected, At: microsArg,
		})
	},
}
