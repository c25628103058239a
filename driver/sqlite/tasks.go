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

// The task queries beside the hot path (insert.go, claim.go, finish.go,
// leases.go): get, cancel, retry, list, steps and leadership. Their SQL is
// in queries.go.

// Get implements driver.Driver: keel_tasks first, then keel_archive. A
// task archived between the two reads is found by the second.
func (d *Driver) Get(ctx context.Context, id int64) (*driver.TaskRow, error) {
	return getAny(ctx, d.rdb, id)
}

// getAny reads a task from keel_tasks or, failing that, keel_archive.
func getAny(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	row, err := getWith(ctx, q, id)
	if errors.Is(err, driver.ErrNotFound) {
		return getArchived(ctx, q, id)
	}
	return row, err
}

func getWith(ctx context.Context, q querier, id int64) (*driver.TaskRow, error) {
	return sqlutil.FindTask(sqlutil.Query(ctx, q, sqlGet, id), scanTask, "get task", id)
}

// Cancel implements driver.Driver.
func (d *Driver) Cancel(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	var opErr error
	err := d.write(ctx, func(tx querier) error {
		opErr = nil
		old, err := getWith(ctx, tx, id)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			return err
		}
		entry, err := sqlutil.CancelledAttempt(old, now)
		if err != nil {
			return fmt.Errorf("cancel task %d: %w", id, err)
		}
		row, err = scanTask(tx.QueryRowContext(ctx, sqlCancel, micros(now), id, entry).Scan)
		if errors.Is(err, sql.ErrNoRows) {
			_, err := getAny(ctx, tx, id) // an archived task: wrong state
			opErr = sqlutil.MissingOrWrongState(id, err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("cancel task %d: %w", id, err)
		}
		var tally sqlutil.Tally
		tally.Update(sqlutil.StateOf(old), sqlutil.StateOf(row), now, false)
		return count(ctx, tx, &tally)
	})
	if err != nil {
		return nil, err
	}
	return row, opErr
}

// Retry implements driver.Driver.
func (d *Driver) Retry(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error) {
	var row *driver.TaskRow
	var opErr error
	err := d.write(ctx, func(tx querier) error {
		opErr = nil
		var key sql.NullString
		err := tx.QueryRowContext(ctx, sqlKeyOf, id).Scan(&key)
		if errors.Is(err, sql.ErrNoRows) {
			_, err := getArchived(ctx, tx, id) // an archived task: wrong state
			opErr = sqlutil.MissingOrWrongState(id, err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("retry task %d: %w", id, err)
		}
		if key.Valid {
			var n int
			if err := tx.QueryRowContext(ctx, sqlKeyHeld, key.String, id).Scan(&n); err != nil {
				return fmt.Errorf("retry task %d: %w", id, err)
			}
			if n > 0 {
				opErr = sqlutil.KeyTaken(id)
				return nil
			}
		}
		old, err := getWith(ctx, tx, id)
		if err != nil {
			return err
		}
		row, err = scanTask(tx.QueryRowContext(ctx, sqlRetry, micros(now), id).Scan)
		if errors.Is(err, sql.ErrNoRows) {
			opErr = fmt.Errorf("retry task %d: %w", id, driver.ErrWrongState)
			return nil
		}
		if err != nil {
			return fmt.Errorf("retry task %d: %w", id, err)
		}
		var tally sqlutil.Tally
		tally.Update(sqlutil.StateOf(old), sqlutil.StateOf(row), now, false)
		return count(ctx, tx, &tally)
	})
	if err != nil {
		return nil, err
	}
	return row, opErr
}

// listSQL is List's query and arguments for p.
func (d *Driver) listSQL(p driver.Filter) (string, []any) {
	base := sqlList
	if p.State == driver.StateRunning {
		// The running tasks, however few, from their lease index, then
		// sorted: walking every id backwards for them, which SQLite's
		// planner prefers for ORDER BY id LIMIT, reads the whole table
		// when few run.
		base += ` INDEXED BY keel_tasks_lease`
	}
	return sqlutil.ListQuery(base, p, sqlutil.Question, func(t time.Time) any { return micros(t) })
}

// Lead implements driver.Driver.
func (d *Driver) Lead(ctx context.Context, p driver.LeadParams) (bool, error) {
	var leading bool
	err := d.write(ctx, func(tx querier) error {
		var owner string
		now := p.Now.Add(waited(tx)) // the term counts from the write, as a lease does
		err := tx.QueryRowContext(ctx, sqlLead, p.Name, p.Owner, micros(now.Add(p.TTL)), micros(now)).Scan(&owner)
		leading = err == nil
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("elect leader: %w", err)
		}
		return nil
	})
	return leading, err
}

// taskSQL are the task statements of sqlutil.Ops.
func (d *Driver) taskSQL() sqlutil.TaskSQL {
	return sqlutil.TaskSQL{ByKey: sqlByKey, Resign: sqlResign, Step: sqlSaveStep, Scan: scanTask, ListQuery: d.listSQL,
		StepArgs: func(p driver.StepParams) []any {
			return []any{p.Name, string(p.Result), p.Now.UTC().Format(driver.StepTimeLayout), micros(p.Now), p.ID, p.Fence, p.Owner}
		}}
}
