package postgres

import (
	"context"
	"fmt"
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

func scanRejected(scan sqlutil.Scan) (*driver.RejectedRow, error) {
	return sqlutil.ScanRejected(scan, sqlutil.UTC, optTime)
}

func scanSource(scan sqlutil.Scan) (*driver.SourceRow, error) {
	return sqlutil.ScanSource(scan, sqlutil.UTC)
}

// InsertRejected implements driver.SourceStore.
func (d *Driver) InsertRejected(ctx context.Context, params []driver.RejectedParams) ([]driver.RejectedResult, error) {
	if err := sqlutil.ValidateRejected(params); err != nil {
		return nil, fmt.Errorf("insert rejected: %w", err)
	}
	var out []driver.RejectedResult
	err := d.scheduleTx(ctx, func(q querier) error {
		var err error
		out, err = sqlutil.InsertRejected(params, sqlutil.RejectedSteps{
			Insert: func(p *driver.RejectedParams) (int64, bool, error) {
				return d.rejectedID(ctx, q, sqlInsertRejected, sqlutil.RejectedArgs(p, timeArg)...)
			},
			Find: func(source string, digest []byte) (int64, bool, error) {
				return d.rejectedID(ctx, q, sqlFindRejected, source, digest)
			},
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert rejected: %w", err)
	}
	return out, nil
}

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

// ListRejected implements driver.SourceStore.
func (d *Driver) ListRejected(ctx context.Context, f driver.RejectedFilter) ([]driver.RejectedRow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.q(sqlListRejected), sqlutil.RejectedFilterArgs(f)...), scanRejected)
	if err != nil {
		return nil, fmt.Errorf("list rejected: %w", err)
	}
	return out, nil
}

// GetRejected implements driver.SourceStore.
func (d *Driver) GetRejected(ctx context.Context, id int64) (*driver.RejectedRow, error) {
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.q(sqlGetRejected), id), scanRejected)
	if err == nil && len(out) == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get rejected %d: %w", id, err)
	}
	return &out[0], nil
}

// ResolveRejected implements driver.SourceStore.
func (d *Driver) ResolveRejected(ctx context.Context, id, taskID int64, now time.Time) (bool, error) {
	if err := sqlutil.ValidateResolve(taskID, now); err != nil {
		return false, fmt.Errorf("resolve rejected %d: %w", id, err)
	}
	q := pgxQuerier{db: d.pool}
	applied, err := sqlutil.ResolveRejected(func() (int64, error) {
		return q.exec(ctx, d.q(sqlResolveRejected), []any{sqlutil.AlertTime(now), taskID, id})
	}, func() (bool, error) {
		var ok bool
		err := q.query(ctx, d.q(sqlRejectedExists), []any{id}, func(scan func(dest ...any) error) error { return scan(&ok) })
		return ok, err
	})
	if err != nil {
		return false, fmt.Errorf("resolve rejected %d: %w", id, err)
	}
	return applied, nil
}

// DeleteRejected implements driver.SourceStore.
func (d *Driver) DeleteRejected(ctx context.Context, id int64) error {
	n, err := pgxQuerier{db: d.pool}.exec(ctx, d.q(sqlDeleteRejected), []any{id})
	if err == nil && n == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete rejected %d: %w", id, err)
	}
	return nil
}

// ReportSource implements driver.SourceStore.
func (d *Driver) ReportSource(ctx context.Context, r driver.SourceReport) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if _, err := (pgxQuerier{db: d.pool}).exec(ctx, d.q(sqlReportSource), sqlutil.ReportArgs(r, timeArg)); err != nil {
		return fmt.Errorf("report source %s on %s: %w", r.Source, r.Node, err)
	}
	return nil
}

// ListSources implements driver.SourceStore.
func (d *Driver) ListSources(ctx context.Context) ([]driver.SourceRow, error) {
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.q(sqlListSources)), scanSource)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	return out, nil
}

var _ driver.SourceStore = (*Driver)(nil)
