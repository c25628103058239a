package sqlutil

import (
	"time"

	"github.com/keelq/keel/driver"
)

// ScheduleColumns are the keel_schedules columns ScanSchedule reads, in
// its order.
const ScheduleColumns = `name, spec, time_zone, type, queue, payload, priority, missed, paused, last_tick, created_at, updated_at`

// ScanSchedule reads one row selected with ScheduleColumns; T is how the
// database hands over a timestamp and at turns it into a UTC time.
func ScanSchedule[T any](scan Scan, at func(T) time.Time) (*driver.ScheduleRow, error) {
	var (
		s                driver.ScheduleRow
		payload          string
		lastTick         int64
		created, updated T
	)
	if err := scan(&s.Name, &s.Spec, &s.TimeZone, &s.Type, &s.Queue, &payload, &s.Priority, &s.Missed, &s.Paused,
		&lastTick, &created, &updated); err != nil {
		return nil, err
	}
	s.Payload = []byte(payload)
	s.LastTick = time.Unix(lastTick, 0).UTC()
	s.CreatedAt, s.UpdatedAt = at(created), at(updated)
	return &s, nil
}
