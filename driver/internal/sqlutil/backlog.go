package sqlutil

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/keelq/keel/driver"
)

// ScanBacklogPeak scans a row of minute and pending.
func ScanBacklogPeak(scan Scan) (*driver.BacklogPeak, error) {
	var p driver.BacklogPeak
	if err := scan(&p.Minute, &p.Pending); err != nil {
		return nil, err
	}
	return &p, nil
}

// FirstMinute scans the one row of a min(minute) query: NULL when the
// history holds no minute.
func FirstMinute(scan Scan) (int64, bool, error) {
	var m sql.NullInt64
	if err := scan(&m); err != nil {
		return 0, false, fmt.Errorf("read the first minute of history: %w", err)
	}
	return m.Int64, m.Valid, nil
}

// BacklogSQL are a driver's keel_backlog statements: Record (minute,
// pending) keeps a minute's peak, Drop (minute) the minutes from one on,
// Peaks (minute) selects minute and pending from one on, FirstMinute the
// first minute of keel_minutes.
type BacklogSQL struct{ Record, Drop, Peaks, FirstMinute string }

// RecordBacklog implements driver.BacklogStore.
func (o *Ops[Q]) RecordBacklog(ctx context.Context, s driver.BacklogSample) error {
	if err := s.Validate(); err != nil {
		return err
	}
	err := o.c.DB.Do(ctx, func(q Q) error {
		c := o.c.DB.Conn(q)
		if _, err := c.Exec(ctx, o.c.SQL.Backlog.Record, s.Minute, s.Pending); err != nil {
			return err
		}
		if s.DropBefore > 0 {
			_, err := c.Exec(ctx, o.c.SQL.Backlog.Drop, s.DropBefore)
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record backlog: %w", err)
	}
	return nil
}

// BacklogPeaks implements driver.BacklogStore.
func (o *Ops[Q]) BacklogPeaks(ctx context.Context, since int64) ([]driver.BacklogPeak, error) {
	out, err := Collect(o.c.DB.pool().Rows(ctx, o.c.SQL.Backlog.Peaks, since), ScanBacklogPeak)
	if err != nil {
		return nil, fmt.Errorf("read backlog peaks: %w", err)
	}
	return out, nil
}

// FirstMinute implements driver.BacklogStore.
func (o *Ops[Q]) FirstMinute(ctx context.Context) (int64, bool, error) {
	var m int64
	var ok bool
	err := o.c.DB.pool().Rows(ctx, o.c.SQL.Backlog.FirstMinute)(func(scan Scan) error {
		var err error
		m, ok, err = FirstMinute(scan)
		return err
	})
	return m, ok, err
}
