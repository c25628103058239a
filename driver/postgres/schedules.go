package postgres

import (
	"context"

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
` + sqlutil.UpsertScheduleSet
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

// scheduleSQL are the schedule statements of sqlutil.Ops.
var scheduleSQL = sqlutil.ScheduleSQL{Upsert: sqlUpsertSchedule, List: sqlListSchedules, Get: sqlGetSchedule,
	Pause: sqlPauseSchedule, Resume: sqlResumeSchedule, Delete: sqlDeleteSchedule, Advance: sqlAdvanceTick,
	NowOnce: true,
	Scan:    func(scan sqlutil.Scan) (*driver.ScheduleRow, error) { return sqlutil.ScanSchedule(scan, sqlutil.UTC) }}
