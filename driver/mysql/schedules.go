package mysql

import (
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

// scheduleSQL are the schedule statements of sqlutil.Ops.
var scheduleSQL = sqlutil.ScheduleSQL{Upsert: sqlUpsertSchedule, List: sqlListSchedules, Get: sqlGetSchedule,
	Pause: sqlPauseSchedule, Resume: sqlResumeSchedule, Delete: sqlDeleteSchedule, Advance: sqlAdvanceTick,
	Scan: func(scan sqlutil.Scan) (*driver.ScheduleRow, error) { return sqlutil.ScanSchedule(scan, sqlutil.UTC) }}
