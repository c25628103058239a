package mysql

import (
	"context"
	"database/sql"
	"fmt"
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
	sqlFindRejected = `SELECT id FROM keel_rejected WHERE source = ? AND digest = ?`
	sqlListRejected = `SELECT ` + sqlutil.RejectedColumns + ` FROM keel_rejected
WHERE (? = '' OR source = ?) AND (? = 0 OR resubmitted_at IS NULL) AND (? = 0 OR id < ?)
ORDER BY id DESC LIMIT ?`
	sqlGetRejected     = `SELECT ` + sqlutil.RejectedColumns + ` FROM keel_rejected WHERE id = ?`
	sqlResolveRejected = `UPDATE keel_rejected SET resubmitted_at = ?, task_id = ? WHERE id = ? AND resubmitted_at IS NULL`
	sqlRejectedExists  = `SELECT count(*) FROM keel_rejected WHERE id = ?`
	sqlDeleteRejected  = `DELETE FROM keel_rejected WHERE id = ?`
	sqlReportSource    = `INSERT INTO keel_sources (` + sqlutil.SourceColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    kind = VALUES(kind), type = VALUES(type), state = VALUES(state), last_error = VALUES(last_error),
    accepted = VALUES(accepted), duplicate = VALUES(duplicate), rejected = VALUES(rejected), nacked = VALUES(nacked),
    ack_p50_us = VALUES(ack_p50_us), ack_p99_us = VALUES(ack_p99_us),
    started_at = VALUES(started_at), updated_at = VALUES(updated_at)`
	sqlListSources = `SELECT ` + sqlutil.SourceColumns + ` FROM keel_sources ORDER BY source, node`
)

// timeArg is a time as a DATETIME(6) argument (the connection's zone is
// UTC).
func timeArg(t time.Time) any { return t.UTC() }

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
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = sqlutil.InsertRejectedSQL(ctx, tx, params, sqlutil.RejectedSQL{
			Insert: sqlInsertRejected, Find: sqlFindRejected, At: timeArg, Duplicate: isDuplicate,
		})
		if err != nil {
			return err
		}
		// A context that ended before the commit writes nothing.
		return ctx.Err()
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
	a := sqlutil.RejectedFilterArgs(f) // source, open, before, limit
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlListRejected, a[0], a[0], a[1], a[2], a[2], a[3]), scanRejected)
	if err != nil {
		return nil, fmt.Errorf("list rejected: %w", err)
	}
	return out, nil
}

// GetRejected implements driver.SourceStore.
func (d *Driver) GetRejected(ctx context.Context, id int64) (*driver.RejectedRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlGetRejected, id), scanRejected)
	if err == nil && len(out) == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get rejected %d: %w", id, err)
	}
	return &out[0], nil
}

// ResolveRejected implements driver.SourceStore. The connection counts
// matched rows (clientFoundRows), which the WHERE makes the changed ones.
func (d *Driver) ResolveRejected(ctx context.Context, id, taskID int64, now time.Time) (bool, error) {
	if err := sqlutil.ValidateResolve(taskID, now); err != nil {
		return false, fmt.Errorf("resolve rejected %d: %w", id, err)
	}
	applied, err := sqlutil.ResolveRejected(func() (int64, error) {
		var n int64
		err := d.retry(ctx, func() error {
			res, err := d.db.ExecContext(ctx, sqlResolveRejected, sqlutil.AlertTime(now), taskID, id)
			if err == nil {
				n, err = res.RowsAffected()
			}
			return err
		})
		return n, err
	}, func() (bool, error) {
		var n int
		err := d.db.QueryRowContext(ctx, sqlRejectedExists, id).Scan(&n)
		return n > 0, err
	})
	if err != nil {
		return false, fmt.Errorf("resolve rejected %d: %w", id, err)
	}
	return applied, nil
}

// DeleteRejected implements driver.SourceStore.
func (d *Driver) DeleteRejected(ctx context.Context, id int64) error {
	var n int64
	err := d.retry(ctx, func() error {
		res, err := d.db.ExecContext(ctx, sqlDeleteRejected, id)
		if err == nil {
			n, err = res.RowsAffected()
		}
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
	err := d.retry(ctx, func() error {
		_, err := d.db.ExecContext(ctx, sqlReportSource, sqlutil.ReportArgs(r, timeArg)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("report source %s on %s: %w", r.Source, r.Node, err)
	}
	return nil
}

// ListSources implements driver.SourceStore.
func (d *Driver) ListSources(ctx context.Context) ([]driver.SourceRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlListSources), scanSource)
	if err != nil {
		return nil, fmt.Errorf("list sources: %w", err)
	}
	return out, nil
}

var _ driver.SourceStore = (*Driver)(nil)
