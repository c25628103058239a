package sqlite

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Periodic tasks' schedules (see driver.ScheduleStore). Writes go through
// the single writer, so a tick's compare-and-set and its task's insert
// commit together.

const (
	sqlUpsertSchedule = `INSERT INTO keel_schedules (` + sqlutil.ScheduleColumns + `)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET
    last_tick = CASE WHEN keel_schedules.spec <> excluded.spec OR keel_schedules.time_zone <> excluded.time_zone
        THEN max(keel_schedules.last_tick, excluded.last_tick) ELSE keel_schedules.last_tick END,
    spec = excluded.spec, time_zone = excluded.time_zone, type = excluded.type,
    queue = excluded.queue, payload = excluded.payload, priority = excluded.priority, missed = excluded.missed,
    updated_at = excluded.updated_at`
	sqlListSchedules  = `SELECT ` + sqlutil.ScheduleColumns + ` FROM keel_schedules ORDER BY name`
	sqlGetSchedule    = `SELECT ` + sqlutil.ScheduleColumns + ` FROM keel_schedules WHERE name = ?`
	sqlPauseSchedule  = `UPDATE keel_schedules SET paused = 1, updated_at = ? WHERE name = ?`
	sqlResumeSchedule = `UPDATE keel_schedules
SET last_tick = CASE WHEN paused <> 0 THEN max(last_tick, ?) ELSE last_tick END, paused = 0, updated_at = ?
WHERE name = ?`
	sqlDeleteSchedule = `DELETE FROM keel_schedules WHERE name = ?`
	sqlAdvanceTick    = `UPDATE keel_schedules SET last_tick = ?, updated_at = ?
WHERE name = ? AND last_tick = ? AND paused = 0`
)

func scanSchedule(scan sqlutil.Scan) (*driver.ScheduleRow, error) {
	return sqlutil.ScanSchedule(scan, fromMicros)
}

// UpsertSchedules implements driver.Driver.
func (d *Driver) UpsertSchedules(ctx context.Context, params []driver.ScheduleParams) error {
	sorted, err := driver.SortedSchedules(params)
	if err != nil {
		return fmt.Errorf("store schedules: %w", err)
	}
	err = d.write(ctx, func(tx querier) error {
		for _, p := range sorted {
			if _, err := tx.ExecContext(ctx, sqlUpsertSchedule, p.Name, p.Spec, p.TimeZone, p.Type, p.Queue, string(p.Payload),
				p.Priority, p.Missed, driver.ScheduleTime(p.Now), micros(p.Now), micros(p.Now)); err != nil {
				return fmt.Errorf("schedule %s: %w", p.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store schedules: %w", err)
	}
	return nil
}

// ListSchedules implements driver.Driver.
func (d *Driver) ListSchedules(ctx context.Context) ([]driver.ScheduleRow, error) {
	out, err := readRows(ctx, d, scanSchedule, sqlListSchedules)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// GetSchedule implements driver.Driver.
func (d *Driver) GetSchedule(ctx context.Context, name string) (*driver.ScheduleRow, error) {
	out, err := readRows(ctx, d, scanSchedule, sqlGetSchedule, name)
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
	err := d.write(ctx, func(tx querier) error {
		row = nil
		var err error
		if p.Paused {
			_, err = tx.ExecContext(ctx, sqlPauseSchedule, micros(p.Now), p.Name)
		} else {
			_, err = tx.ExecContext(ctx, sqlResumeSchedule, driver.ScheduleTime(p.Now), micros(p.Now), p.Name)
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
	var n int64
	err := d.write(ctx, func(tx querier) error {
		res, err := tx.ExecContext(ctx, sqlDeleteSchedule, name)
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
	err := d.write(ctx, func(tx querier) error {
		res, advanced = nil, false
		r, err := tx.ExecContext(ctx, sqlAdvanceTick, driver.ScheduleTime(p.Tick), micros(p.Now), p.Name, driver.ScheduleTime(p.Prev))
		if err != nil {
			return err
		}
		n, err := r.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		advanced = true
		if p.Task == nil {
			return nil
		}
		out, err := insert(ctx, tx, []driver.InsertParams{*p.Task})
		if err != nil {
			return err
		}
		res = &out[0]
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("enqueue tick %s of schedule %s: %w", p.Tick.UTC().Format("2006-01-02T15:04:05Z"), p.Name, err)
	}
	return res, advanced, nil
}
