package sqlite

import (
	"context"
	"errors"
	"fmt"
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
	sqlFindRejected = `SELECT id FROM keel_rejected WHERE source = ? AND digest = ?`
	sqlListRejected = `SELECT ` + sqlutil.RejectedColumns + ` FROM keel_rejected
WHERE (?1 = '' OR source = ?1) AND (?2 = 0 OR resubmitted_at IS NULL) AND (?3 = 0 OR id < ?3)
ORDER BY id DESC LIMIT ?4`
	sqlGetRejected     = `SELECT ` + sqlutil.RejectedColumns + ` FROM keel_rejected WHERE id = ?`
	sqlResolveRejected = `UPDATE keel_rejected SET resubmitted_at = ?, task_id = ? WHERE id = ? AND resubmitted_at IS NULL`
	sqlRejectedExists  = `SELECT count(*) FROM keel_rejected WHERE id = ?`
	sqlDeleteRejected  = `DELETE FROM keel_rejected WHERE id = ?`
	sqlReportSource    = `INSERT INTO keel_sources (` + sqlutil.SourceColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (source, node) DO UPDATE SET
    kind = excluded.kind, type = excluded.type, state = excluded.state, last_error = excluded.last_error,
    accepted = excluded.accepted, duplicate = excluded.duplicate, rejected = excluded.rejected, nacked = excluded.nacked,
    ack_p50_us = excluded.ack_p50_us, ack_p99_us = excluded.ack_p99_us,
    started_at = excluded.started_at, updated_at = excluded.updated_at`
	sqlListSources = `SELECT ` + sqlutil.SourceColumns + ` FROM keel_sources ORDER BY source, node`
)

// microsArg is a time as SQLite stores it.
func microsArg(t time.Time) any { return micros(t) }

func scanRejected(scan sqlutil.Scan) (*driver.RejectedRow, error) {
	return sqlutil.ScanRejected(scan, fromMicros, optTime)
}

func scanSource(scan sqlutil.Scan) (*driver.SourceRow, error) {
	return sqlutil.ScanSource(scan, fromMicros)
}

// InsertRejected implements driver.SourceStore.
func (d *Driver) InsertRejected(ctx context.Context, params []driver.RejectedParams) ([]driver.RejectedResult, error) {
	if err := sqlutil.ValidateRejected(params); err != nil {
		return nil, fmt.Errorf("insert rejected: %w", err)
	}
	var out []driver.RejectedResult
	err := d.write(ctx, func(tx querier) error {
		var err error
		out, err = sqlutil.InsertRejectedSQL(ctx, tx, params, sqlutil.RejectedSQL{
			Insert: sqlInsertRejected, Find: sqlFindRejected, At: microsArg,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert rejected: %w", err)
	}
	return out, nil
}

// ListRejected implements driver.SourceStore.
func (d *Driver) ListRejected(ctx context.Context, f driver.RejectedFilter) ([]driver.RejectedRow, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	out, err := readRows(ctx, d, scanRejected, sqlListRejected, sqlutil.RejectedFilterArgs(f)...)
	if err != nil {
		return nil, fmt.Errorf("list rejected: %w", err)
	}
	return out, nil
}

// GetRejected implements driver.SourceStore.
func (d *Driver) GetRejected(ctx context.Context, id int64) (*driver.RejectedRow, error) {
	out, err := readRows(ctx, d, scanRejected, sqlGetRejected, id)
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
	var applied, missing bool
	err := d.write(ctx, func(tx querier) error {
		var err error
		applied, missing = false, false
		applied, err = sqlutil.ResolveRejected(func() (int64, error) {
			res, err := tx.ExecContext(ctx, sqlResolveRejected, micros(sqlutil.AlertTime(now)), taskID, id)
			if err != nil {
				return 0, err
			}
			return res.RowsAffected()
		}, func() (bool, error) {
			var n int
			err := tx.QueryRowContext(ctx, sqlRejectedExists, id).Scan(&n)
			return n > 0, err
		})
		if errors.Is(err, driver.ErrNotFound) {
			// Not a database error: the writer's batch commits.
			missing = true
			return nil
		}
		return err
	})
	if err == nil && missing {
		err = driver.ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("resolve rejected %d: %w", id, err)
	}
	return applied, nil
}

// DeleteRejected implements driver.SourceStore.
func (d *Driver) DeleteRejected(ctx context.Context, id int64) error {
	var n int64
	err := d.write(ctx, func(tx querier) error {
		res, err := tx.ExecContext(ctx, sqlDeleteRejected, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
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
	err := d.write(ctx, func(tx querier) error {
		_, err := tx.ExecContext(ctx, sqlReportSource, sqlutil.ReportArgs(r, microsArg)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("report source %s on %s: %w", r.Source, r.Node, err)
	}
	return nil
}

// ListSources implements driver.SourceStore.
func (d *Driver) ListSources(ctx context.Context) ([]driver.SourceRow, error) {
	out, err := readRows(ctx, d, scanSource, sqlListSources)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	return out, nil
}

var _ driver.SourceStore = (*Driver)(nil)
