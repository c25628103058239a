package sqlite

import (
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
` + sqlutil.UpsertScheduleSet
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

// scheduleSQL are the schedule statements of sqlutil.Ops.
var scheduleSQL = sqlutil.ScheduleSQL{Upsert: sqlUpsertSchedule, List: sqlListSchedules, Get: sqlGetSchedule,
	Pause: sqlPauseSchedule, Resume: sqlResumeSchedule, Delete: sqlDeleteSchedule, Advance: sqlAdvanceTick,
	Scan: func(scan sqlutil.Scan) (*driver.ScheduleRow, error) { return sqlutil.ScanSchedule(scan, fromMicros) }}
