package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The task queries beside the hot path (insert.go, claim.go, finish.go,
// leases.go): get, cancel, retry, list, steps and leadership. Their SQL is
// in queries.go.

// Get implements driver.Driver: keel_tasks first, then keel_archive.
func (d *Driver) Get(ctx context.Context, id int64) (*driver.TaskRow, error) {
	row, err := d.getWith(ctx, d.db, id)
	if errors.Is(err, driver.ErrNotFound) {
		// Not in keel_tasks: archived, or unknown. A task archived since
		// the first read is found by this later one.
		return d.getArchived(ctx, d.db, id)
	}
	return row, err
}

func (d *Driver) getWith(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	return sqlutil.FindTask(sqlutil.Query(ctx, q, sqlGet, id), sqlutil.ScanTaskUTC, "get task", id)
}

// getMany loads the tasks with the given ids, in no particular order.
func (d *Driver) getMany(ctx context.Context, q querier, ids []int64) ([]driver.TaskRow, error) {
	s := sqlGetIDs.with("{ids}", "?", len(ids), 1)
	out := make([]driver.TaskRow, 0, len(ids))
	err := sqlutil.Query(ctx, q, s.text, s.args(nil, idArgs(ids)...)...)(func(scan sqlutil.Scan) error {
		r, err := sqlutil.ScanTaskUTC(scan)
		if err != nil {
			return err
		}
		out = append(out, *r)
		return nil
	})
	return out, err
}

// update locks the task id (reading the transaction's now), runs one
// conditional single-row UPDATE at that now and, when it matched, reads
// the row back and counts the change, all in one transaction. It returns
// nil when nothing matched, ErrNotFound when there is no such task.
func (d *Driver) update(ctx context.Context, s stmt, now time.Time, id int64) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		row = nil
		var old *driver.TaskRow
		var at time.Time
		err := sqlutil.Query(ctx, tx, sqlGetLocked.text, sqlGetLocked.args(d.now(now), id)...)(func(scan sqlutil.Scan) error {
			var err error
			old, err = sqlutil.ScanTaskUTC(func(dest ...any) error { return scan(append(dest, &at)...) })
			return err
		})
		if err != nil {
			return err
		}
		if old == nil {
			return driver.ErrNotFound
		}
		at = at.UTC()
		res, err := tx.ExecContext(ctx, s.text, s.args(at, id)...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		if row, err = d.getWith(ctx, tx, id); err != nil {
			return err
		}
		var tally sqlutil.Tally
		tally.Update(sqlutil.StateOf(old), sqlutil.StateOf(row), at, false)
		return count(ctx, tx, &tally)
	})
	return row, err
}

// Cancel implements driver.Driver.
func (d *Driver) Cancel(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	row, err := d.update(ctx, sqlCancel, now, id)
	return sqlutil.Changed(ctx, "cancel", id, row, err, d.Get)
}

// Retry implements driver.Driver.
func (d *Driver) Retry(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	row, err := d.update(ctx, sqlRetry, now, id)
	if isDuplicate(err) {
		return nil, sqlutil.KeyTaken(id)
	}
	return sqlutil.Changed(ctx, "retry", id, row, err, d.Get)
}

// Lead implements driver.Driver: take or renew the lease row with one
// conditional upsert, then read who holds it, in one transaction.
func (d *Driver) Lead(ctx context.Context, p driver.LeadParams) (bool, error) {
	leading := false
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, sqlLead.text, sqlLead.args(d.now(p.Now), p.Name, p.Owner, p.TTL.Microseconds())...); err != nil {
			return err
		}
		var owner string
		if err := tx.QueryRowContext(ctx, sqlLeader, p.Name).Scan(&owner); err != nil {
			return err
		}
		leading = owner == p.Owner
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("elect leader: %w", err)
	}
	return leading, nil
}

// taskSQL are the task statements of sqlutil.Ops.
func (d *Driver) taskSQL() sqlutil.TaskSQL {
	return sqlutil.TaskSQL{ByKey: sqlGetByKey, Resign: sqlResign, Step: sqlSaveStep.text, Scan: sqlutil.ScanTaskUTC,
		ListQuery: func(p driver.Filter) (string, []any) {
			return sqlutil.ListQuery(sqlList, p, sqlutil.Question, func(t time.Time) any { return t })
		},
		StepArgs: func(p driver.StepParams) []any {
			return sqlSaveStep.args(d.now(p.Now), p.Name, string(p.Result), p.ID, p.Fence, p.Owner, p.Owner)
		}}
}
