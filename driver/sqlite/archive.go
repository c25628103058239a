package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Archival (migration 006): finished tasks past their retention move from
// keel_tasks to keel_archive; Get still finds them. Their SQL is in
// queries.go.

// Archive implements driver.Driver: in one write of the single writer, it
// picks the oldest succeeded, cancelled and dead tasks past their cutoff
// (in that order, up to Limit in all), copies them to keel_archive,
// deletes them from keel_tasks and takes them off the live counters.
func (d *Driver) Archive(ctx context.Context, p driver.ArchiveParams) (driver.ArchiveResult, error) {
	if err := p.Validate(); err != nil {
		return driver.ArchiveResult{}, fmt.Errorf("archive tasks: %w", err)
	}
	var res driver.ArchiveResult
	err := d.write(ctx, func(tx querier) error {
		res = driver.ArchiveResult{}
		var ids []int64
		var tally sqlutil.Tally
		classes := []struct {
			query  string
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
			err := sqlutil.Query(ctx, tx, c.query, micros(c.before), p.Limit-len(ids))(func(scan sqlutil.Scan) error {
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
				return fmt.Errorf("archive tasks: pick %s: %w", c.state, err)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		list := int64List(ids)
		if _, err := tx.ExecContext(ctx, sqlArchiveCopy, list, micros(p.Now)); err != nil {
			return fmt.Errorf("archive tasks: copy: %w", err)
		}
		if _, err := tx.ExecContext(ctx, sqlArchiveDelete, list); err != nil {
			return fmt.Errorf("archive tasks: delete: %w", err)
		}
		return count(ctx, tx, &tally)
	})
	if err != nil {
		return driver.ArchiveResult{}, err
	}
	return res, nil
}

// PurgeArchive implements driver.Driver.
func (d *Driver) PurgeArchive(ctx context.Context, before time.Time, limit int) (int64, error) {
	if err := driver.ValidatePurgeArchive(before, limit); err != nil {
		return 0, fmt.Errorf("purge archive: %w", err)
	}
	var n int64
	err := d.write(ctx, func(tx querier) error {
		r, err := tx.ExecContext(ctx, sqlPurgeArchive, micros(before), limit)
		if err != nil {
			return fmt.Errorf("purge archive: %w", err)
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// getArchived reads an archived task, or returns driver.ErrNotFound.
func getArchived(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	row, err := sqlutil.ScanArchivedTask(q.QueryRowContext(ctx, sqlGetArchived, id).Scan, fromMicros, optTime)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get archived task %d: %w", id, err)
	}
	return row, nil
}
