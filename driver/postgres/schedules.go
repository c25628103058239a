package postgres

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Periodic tasks' schedules (see driver.ScheduleStore). Every time is the
// params' own (the leader's clock). A tick's compare-and-set and its
// task's insert run in one transaction: a second leader's update waits for
// the first's row lock, then finds last_tick moved and changes nothing.

const (
	sqlUpsertSchedule = `INSERT INTO {schema}.keel_schedules (` + sqlutil.ScheduleColumns + `)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, false, $9, $10, $10)
ON CONFLICT (name) DO UPDATE SET
    last_tick = CASE WHEN keel_schedules.spec <> excluded.spec OR keel_schedules.time_zone <> excluded.time_zone
        THEN greatest(keel_schedules.last_tick, excluded.last_tick) ELSE keel_schedules.last_tick END,
    spec = excluded.spec, time_zone = excluded.time_zone, type = excluded.type,
    queue = excluded.queue, payload = excluded.payload, priority = excluded.priority, missed = excluded.missed,
    updated_at = excluded.updated_at`
	sqlListSchedules  = `SELECT ` + sqlutil.ScheduleColumns + ` FROM {schema}.keel_schedules ORDER BY name`
	sqlGetSchedule    = `SELECT ` + sqlutil.ScheduleColumns + ` FROM {schema}.keel_schedules WHERE name = $1`
	sqlPauseSchedule  = `UPDATE {schema}.keel_schedules SET paused = true, updated_at = $1 WHERE name = $2`
	sqlResumeSchedule = `UPDATE {schema}.keel_schedules
SET last_tick = CASE WHEN paused THEN greatest(last_tick, $1) ELSE last_tick END, paused = false, updated_at = $2
WHERE name = $3`
	sqlDeleteSchedule = `DELETE FROM {schema}.keel_schedules WHERE name = $1`
	sqlAdvanceTick    = `UPDATE {schema}.keel_schedules SET last_tick = $1, updated_at = $2
WHERE name = $3 AND last_tick = $4 AND NOT paused`
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
	err = d.scheduleTx(ctx, func(q querier) error {
		for _, p := range sorted {
			if _, err := q.exec(ctx, d.q(sqlUpsertSchedule), []any{p.Name, p.Spec, p.TimeZone, p.Type, p.Queue, string(p.Payload),
				p.Priority, p.Missed, driver.ScheduleTime(p.Now), sqlutil.AlertTime(p.Now)}); err != nil {
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
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.q(sqlListSchedules)), scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// GetSchedule implements driver.Driver.
func (d *Driver) GetSchedule(ctx context.Context, name string) (*driver.ScheduleRow, error) {
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.q(sqlGetSchedule), name), scanSchedule)
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
	err := d.scheduleTx(ctx, func(q querier) error {
		row = nil
		var err error
		if p.Paused {
			_, err = q.exec(ctx, d.q(sqlPauseSchedule), []any{sqlutil.AlertTime(p.Now), p.Name})
		} else {
			_, err = q.exec(ctx, d.q(sqlResumeSchedule), []any{driver.ScheduleTime(p.Now), sqlutil.AlertTime(p.Now), p.Name})
		}
		if err != nil {
			return err
		}
		rows, err := sqlutil.Collect(rowsOf(ctx, q, d.q(sqlGetSchedule), p.Name), scanSchedule)
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
	n, err := pgxQuerier{db: d.pool}.exec(ctx, d.q(sqlDeleteSchedule), []any{name})
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
		queues   []string
	)
	err := d.scheduleTx(ctx, func(q querier) error {
		res, advanced, queues = nil, false, nil
		n, err := q.exec(ctx, d.q(sqlAdvanceTick), []any{driver.ScheduleTime(p.Tick), sqlutil.AlertTime(p.Now), p.Name, driver.ScheduleTime(p.Prev)})
		if err != nil || n == 0 {
			return err
		}
		advanced = true
		if p.Task == nil {
			return nil
		}
		out, qs, err := d.insertNotify(ctx, q, []driver.InsertParams{*p.Task}, true)
		if err != nil {
			return err
		}
		res, queues = &out[0], qs
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("enqueue tick %s of schedule %s: %w", p.Tick.UTC().Format("2006-01-02T15:04:05Z"), p.Name, err)
	}
	d.wakeLocal(queues)
	return res, advanced, nil
}

// scheduleTx runs fn in a transaction of the driver's own, run again as a whole
// after a deadlock or serialization failure. A context that ended before
// the commit writes nothing.
func (d *Driver) scheduleTx(ctx context.Context, fn func(q querier) error) error {
	for attempt := 0; ; attempt++ {
		err := d.runScheduleTx(ctx, fn)
		if err == nil || attempt+1 >= maxTxAttempts || !retryable(err) {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
}

func (d *Driver) runScheduleTx(ctx context.Context, fn func(q querier) error) error {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return unavailable(ctx, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	if err := fn(pgxQuerier{db: tx}); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return unavailable(ctx, tx.Commit(context.WithoutCancel(ctx)))
}
