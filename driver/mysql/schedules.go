package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Periodic tasks' schedules (see driver.ScheduleStore). The upsert sets
// last_tick first: MySQL reads the columns a SET list already changed.
// Every time is the
// params' own (the leader's clock). A tick's compare-and-set and its
// task's insert run in one transaction: a second leader's update waits for
// the first's row lock, then reads the committed last_tick, finds it moved
// and matches no row (clientFoundRows counts matched rows).

const (
	sqlUpsertSchedule = `INSERT INTO keel_schedules (` + sqlutil.ScheduleColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, FALSE, ?, ?, ?)
ON DUPLICATE KEY UPDATE
    last_tick = CASE WHEN spec <> VALUES(spec) OR time_zone <> VALUES(time_zone)
        THEN GREATEST(last_tick, VALUES(last_tick)) ELSE last_tick END,
    spec = VALUES(spec), time_zone = VALUES(time_zone), type = VALUES(type),
    queue = VALUES(queue), payload = VALUES(payload), priority = VALUES(priority), missed = VALUES(missed),
    updated_at = VALUES(updated_at)`
	sqlListSchedules  = `SELECT ` + sqlutil.ScheduleColumns + ` FROM keel_schedules ORDER BY name`
	sqlGetSchedule    = `SELECT ` + sqlutil.ScheduleColumns + ` FROM keel_schedules WHERE name = ?`
	sqlPauseSchedule  = `UPDATE keel_schedules SET paused = TRUE, updated_at = ? WHERE name = ?`
	sqlResumeSchedule = `UPDATE keel_schedules
SET last_tick = CASE WHEN paused THEN GREATEST(last_tick, ?) ELSE last_tick END, paused = FALSE, updated_at = ?
WHERE name = ?`
	sqlDeleteSchedule = `DELETE FROM keel_schedules WHERE name = ?`
	sqlAdvanceTick    = `UPDATE keel_schedules SET last_tick = ?, updated_at = ?
WHERE name = ? AND last_tick = ? AND NOT paused`
)

func scanSchedule(scan sqlutil.Scan) (*driver.ScheduleRow, error) {
	return sqlutil.ScanSchedule(scan, sqlutil.UTC)
}

// UpsertSchedules implements driver.Driver.
func (d *Driver) UpsertSchedules(ctx context.Context, params []driver.ScheduleParams) error {
	sorted, err := driver.SortedSchedules(params)
	if err != nil {
		return fmt.Errorf("store schedules: %w", err)
	}
	err = d.inTx(ctx, func(tx *sql.Tx) error {
		for _, p := range sorted {
			now := sqlutil.AlertTime(p.Now)
			if _, err := tx.ExecContext(ctx, sqlUpsertSchedule, p.Name, p.Spec, p.TimeZone, p.Type, p.Queue, string(p.Payload),
				p.Priority, p.Missed, driver.ScheduleTime(p.Now), now, now); err != nil {
				return fmt.Errorf("schedule %s: %w", p.Name, err)
			}
		}
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("store schedules: %w", err)
	}
	return nil
}

// ListSchedules implements driver.Driver.
func (d *Driver) ListSchedules(ctx context.Context) ([]driver.ScheduleRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlListSchedules), scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// GetSchedule implements driver.Driver.
func (d *Driver) GetSchedule(ctx context.Context, name string) (*driver.ScheduleRow, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlGetSchedule, name), scanSchedule)
	if err == nil && len(out) == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule %.140q: %w", name, err)
	}
	return &out[0], nil
}

// PauseSchedule implements driver.Driver.
func (d *Driver) PauseSchedule(ctx context.Context, p driver.PauseScheduleParams) (*driver.ScheduleRow, error) {
	var row *driver.ScheduleRow
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		row = nil
		var err error
		now := sqlutil.AlertTime(p.Now)
		if p.Paused {
			_, err = tx.ExecContext(ctx, sqlPauseSchedule, now, p.Name)
		} else {
			_, err = tx.ExecContext(ctx, sqlResumeSchedule, driver.ScheduleTime(p.Now), now, p.Name)
		}
		if err != nil {
			return err
		}
		rows, err := sqlutil.Collect(sqlutil.Query(ctx, tx, sqlGetSchedule, p.Name), scanSchedule)
		if len(rows) == 1 {
			row = &rows[0]
		}
		return err
	})
	if err == nil && row == nil {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pause schedule %.140q: %w", p.Name, err)
	}
	return row, nil
}

// DeleteSchedule implements driver.Driver.
func (d *Driver) DeleteSchedule(ctx context.Context, name string) error {
	res, err := d.db.ExecContext(ctx, sqlDeleteSchedule, name)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err == nil && n == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete schedule %.140q: %w", name, err)
	}
	return nil
}

// EnqueueTick implements driver.Driver.
func (d *Driver) EnqueueTick(ctx context.Context, p driver.TickParams) (*driver.InsertResult, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, fmt.Errorf("enqueue tick: %w", err)
	}
	var (
		res      *driver.InsertResult
		advanced bool
	)
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		res, advanced = nil, false
		r, err := tx.ExecContext(ctx, sqlAdvanceTick, driver.ScheduleTime(p.Tick), sqlutil.AlertTime(p.Now), p.Name, driver.ScheduleTime(p.Prev))
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		advanced = true
		if p.Task != nil {
			out, err := d.insert(ctx, tx, []driver.InsertParams{*p.Task})
			if err != nil {
				return err
			}
			res = &out[0]
		}
		// A context that ended before the commit writes nothing.
		return ctx.Err()
	})
	if err != nil {
		return nil, false, fmt.Errorf("enqueue tick %s of schedule %s: %w", p.Tick.UTC().Format("2006-01-02T15:04:05Z"), p.Name, err)
	}
	return res, advanced, nil
}
