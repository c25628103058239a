package sqlutil

import (
	"context"
	"fmt"
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

// ScheduleSQL are a driver's keel_schedules statements, each taking its
// arguments in the order named: Upsert (ScheduleColumns but paused, the
// last tick at the params' now; with NowOnce created_at and updated_at
// are one argument), List, Get (name), Pause (now, name), Resume (tick,
// now, name), Delete (name) and Advance (tick, now, name, previous tick).
// Scan reads a row of List or Get.
type ScheduleSQL struct {
	Upsert, List, Get, Pause, Resume, Delete, Advance string
	NowOnce                                           bool
	Scan                                              func(Scan) (*driver.ScheduleRow, error)
}

// UpsertSchedules implements driver.Driver.
func (o *Ops[Q]) UpsertSchedules(ctx context.Context, params []driver.ScheduleParams) error {
	sorted, err := driver.SortedSchedules(params)
	if err != nil {
		return fmt.Errorf("store schedules: %w", err)
	}
	s, db := o.c.SQL.Schedules, o.c.DB
	err = db.Commit(ctx, func(q Q) error {
		for _, p := range sorted {
			now := db.Time(AlertTime(p.Now))
			args := []any{p.Name, p.Spec, p.TimeZone, p.Type, p.Queue, string(p.Payload), p.Priority, p.Missed,
				driver.ScheduleTime(p.Now), now, now}
			if s.NowOnce {
				args = args[:len(args)-1]
			}
			if _, err := db.Conn(q).Exec(ctx, s.Upsert, args...); err != nil {
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
func (o *Ops[Q]) ListSchedules(ctx context.Context) ([]driver.ScheduleRow, error) {
	out, err := Collect(o.c.DB.pool().Rows(ctx, o.c.SQL.Schedules.List), o.c.SQL.Schedules.Scan)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// GetSchedule implements driver.Driver.
func (o *Ops[Q]) GetSchedule(ctx context.Context, name string) (*driver.ScheduleRow, error) {
	row, err := One(o.c.DB.pool().Rows(ctx, o.c.SQL.Schedules.Get, name), o.c.SQL.Schedules.Scan)
	if err == nil && row == nil {
		err = driver.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule %.140q: %w", name, err)
	}
	return row, nil
}

// PauseSchedule implements driver.Driver.
func (o *Ops[Q]) PauseSchedule(ctx context.Context, p driver.PauseScheduleParams) (*driver.ScheduleRow, error) {
	s, db := o.c.SQL.Schedules, o.c.DB
	var row *driver.ScheduleRow
	err := db.Commit(ctx, func(q Q) error {
		c := db.Conn(q)
		now := db.Time(AlertTime(p.Now))
		var err error
		if p.Paused {
			_, err = c.Exec(ctx, s.Pause, now, p.Name)
		} else {
			_, err = c.Exec(ctx, s.Resume, driver.ScheduleTime(p.Now), now, p.Name)
		}
		if err != nil {
			return err
		}
		row, err = One(c.Rows(ctx, s.Get, p.Name), s.Scan)
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
func (o *Ops[Q]) DeleteSchedule(ctx context.Context, name string) error {
	n, err := o.c.DB.exec(ctx, o.c.DB.Do, o.c.SQL.Schedules.Delete, name)
	if err == nil && n == 0 {
		err = driver.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete schedule %.140q: %w", name, err)
	}
	return nil
}

// EnqueueTick implements driver.Driver: the tick's compare-and-set and its
// task's insert commit together.
func (o *Ops[Q]) EnqueueTick(ctx context.Context, p driver.TickParams) (*driver.InsertResult, bool, error) {
	if err := p.Validate(); err != nil {
		return nil, false, fmt.Errorf("enqueue tick: %w", err)
	}
	var (
		res      *driver.InsertResult
		advanced bool
		after    func()
	)
	db := o.c.DB
	err := db.Commit(ctx, func(q Q) error {
		res, advanced, after = nil, false, nil
		n, err := db.Conn(q).Exec(ctx, o.c.SQL.Schedules.Advance, driver.ScheduleTime(p.Tick), db.Time(AlertTime(p.Now)),
			p.Name, driver.ScheduleTime(p.Prev))
		if err != nil || n == 0 {
			return err
		}
		advanced = true
		if p.Task == nil {
			return nil
		}
		out, then, err := o.c.InsertIn(ctx, q, []driver.InsertParams{*p.Task})
		if err != nil {
			return err
		}
		res, after = &out[0], then
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("enqueue tick %s of schedule %s: %w", p.Tick.UTC().Format("2006-01-02T15:04:05Z"), p.Name, err)
	}
	if after != nil {
		after()
	}
	return res, advanced, nil
}
