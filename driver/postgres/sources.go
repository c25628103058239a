package postgres

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Broker sources' rejected messages and reports (keel_rejected and
// keel_sources, migration 016). A message's insert skips a stored
// duplicate (ON CONFLICT DO NOTHING waits for a concurrent insert of the
// same source and digest to commit), then reads its id: under READ
// COMMITTED each statement sees what committed before it.

const (
	sqlInsertRejected = `INSERT INTO {schema}.keel_rejected (` + sqlutil.RejectedInsertColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (source, digest) DO NOTHING RETURNING id`
	sqlFindRejected = `SELECT id FROM {schema}.keel_rejected WHERE source = $1 AND digest = $2`
	sqlListRejected = `SELECT ` + sqlutil.RejectedColumns + ` FROM {schema}.keel_rejected
WHERE ($1 = '' OR source = $1) AND ($2 = 0 OR resubmitted_at IS NULL) AND ($3 = 0 OR id < $3)
ORDER BY id DESC LIMIT $4`
	sqlGetRejected     = `SELECT ` + sqlutil.RejectedColumns + ` FROM {schema}.keel_rejected WHERE id = $1`
	sqlResolveRejected = `UPDATE {schema}.keel_rejected SET resubmitted_at = $1, task_id = $2
WHERE id = $3 AND resubmitted_at IS NULL`
	sqlRejectedExists = `SELECT EXISTS (SELECT 1 FROM {schema}.keel_rejected WHERE id = $1)`
	sqlDeleteRejected = `DELETE FROM {schema}.keel_rejected WHERE id = $1`
	sqlReportSource   = `INSERT INTO {schema}.keel_sources (` + sqlutil.SourceColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (source, node) DO UPDATE SET
    kind = excluded.kind, type = excluded.type, state = excluded.state, last_error = excluded.last_error,
    accepted = excluded.accepted, duplicate = excluded.duplicate, rejected = excluded.rejected, nacked = excluded.nacked,
    ack_p50_us = excluded.ack_p50_us, ack_p99_us = excluded.ack_p99_us,
    started_at = excluded.started_at, updated_at = excluded.updated_at`
	sqlListSources = `SELECT ` + sqlutil.SourceColumns + ` FROM {schema}.keel_sources ORDER BY source, node`
)

// timeArg is a time as a timestamptz argument.
func timeArg(t time.Time) any { return t }

// rejectedID runs query, which returns at most one id.
func (d *Driver) rejectedID(ctx context.Context, q querier, query string, args ...any) (int64, bool, error) {
	var (
		id    int64
		found bool
	)
	err := q.query(ctx, d.q(query), args, func(scan func(dest ...any) error) error {
		found = true
		return scan(&id)
	})
	return id, found && err == nil, err
}

var _ driver.SourceStore = (*Driver)(nil)

// sourceSQL are the source statements of sqlutil.Ops.
func (d *Driver) sourceSQL() sqlutil.SourceSQL[querier] {
	return sqlutil.SourceSQL[querier]{ListRejected: sqlListRejected, GetRejected: sqlGetRejected, Resolve: sqlResolveRejected,
		Exists: sqlRejectedExists, DeleteRejected: sqlDeleteRejected, Report: sqlReportSource, ListSources: sqlListSources,
		ScanRejected: sqlutil.ScanRejectedUTC, ScanSource: sqlutil.ScanSourceUTC,
		ExistsBool: true,
		InsertRejected: func(ctx context.Context, q querier, params []driver.RejectedParams) ([]driver.RejectedResult, error) {
			return sqlutil.InsertRejected(params, sqlutil.RejectedSteps{
				Insert: func(p *driver.RejectedParams) (int64, bool, error) {
					return d.rejectedID(ctx, q, sqlInsertRejected, sqlutil.RejectedArgs(p, timeArg)...)
				},
				Find: func(source string, digest []byte) (int64, bool, error) {
					return d.rejectedID(ctx, q, sqlFindRejected, source, digest)
				},
			})
		},
	}
}
