package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Archival (migration 006): finished tasks past their retention move from
// keel_tasks to keel_archive; Get still finds them. Their SQL is in
// queries.go.

// Archive implements driver.Driver: in one transaction, it locks the
// oldest succeeded, cancelled and dead tasks past their cutoff (in that
// order, up to Limit in all, skipping rows another transaction holds),
// copies them to keel_archive, deletes them from keel_tasks and takes them
// off the live counters. The cutoffs are taken relative to Now, so without
// Options.CallerClock they are as far before the database's now as they
// are before Now.
func (d *Driver) Archive(ctx context.Context, p driver.ArchiveParams) (driver.ArchiveResult, error) {
	if err := p.Validate(); err != nil {
		return driver.ArchiveResult{}, fmt.Errorf("archive tasks: %w", err)
	}
	now := d.now(p.Now)
	var res driver.ArchiveResult
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		res = driver.ArchiveResult{}
		var ids []int64
		var tally sqlutil.Tally
		classes := []struct {
			pick   stmt
			before time.Time
			state  driver.State
			n      *int64
		}{
			{sqlArchivePickSucceeded, p.SucceededBefore, driver.StateSucceeded, &res.Succeeded},
			{sqlArchivePickCancelled, p.SucceededBefore, driver.StateCancelled, &res.Cancelled},
			{sqlArchivePickDead, p.DeadBefore, driver.StateDead, &res.Dead},
		}
		for _, c := range classes {
			if c.before.IsZero() || len(ids) >= p.Limit {
				continue
			}
			args := c.pick.args(now, offset(c.before, p.Now), p.Limit-len(ids))
			err := sqlutil.Query(ctx, tx, c.pick.text, args...)(func(scan sqlutil.Scan) error {
				var id int64
				o := sqlutil.RowState{State: c.state}
				if err := scan(&id, &o.Queue, &o.Type); err != nil {
					return err
				}
				ids = append(ids, id)
				*c.n++
				tally.Delete(o)
				return nil
			})
			if err != nil {
				return fmt.Errorf("pick %s: %w", c.state, err)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		// The rows are locked: every one is moved.
		cp := sqlArchiveCopy.with("{ids}", "?", len(ids), 1)
		if _, err := tx.ExecContext(ctx, cp.text, cp.args(now, idArgs(ids)...)...); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		del := sqlArchiveDelete.with("{ids}", "?", len(ids), 1)
		if _, err := tx.ExecContext(ctx, del.text, del.args(nil, idArgs(ids)...)...); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		return count(ctx, tx, &tally)
	})
	if err != nil {
		return driver.ArchiveResult{}, fmt.Errorf("archive tasks: %w", err)
	}
	return res, nil
}

// PurgeArchive implements driver.Driver.
func (d *Driver) PurgeArchive(ctx context.Context, before time.Time, limit int) (int64, error) {
	if err := driver.ValidatePurgeArchive(before, limit); err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	var n int64
	err := d.retry(ctx, func() error {
		r, err := d.db.ExecContext(ctx, sqlPurgeArchive, before.UTC(), limit)
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	return n, nil
}

// getArchived reads an archived task, or returns driver.ErrNotFound.
func (d *Driver) getArchived(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	got, err := sqlutil.Collect(sqlutil.Query(ctx, q, sqlGetArchived, id), func(scan sqlutil.Scan) (*driver.TaskRow, error) {
		return sqlutil.ScanArchivedTask(scan, sqlutil.UTC, optTime)
	})
	if err != nil {
		return nil, fmt.Errorf("get archived task %d: %w", id, err)
	}
	if len(got) == 0 {
		return nil, driver.ErrNotFound
	}
	return &got[0], nil
}
