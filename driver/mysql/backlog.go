package mysql

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The backlog's peak per minute (keel_backlog, migration 015).

const (
	sqlRecordBacklog = `INSERT INTO keel_backlog (minute, pending) VALUES (?, ?)
ON DUPLICATE KEY UPDATE pending = GREATEST(pending, VALUES(pending))`
	sqlDropBacklog  = `DELETE FROM keel_backlog WHERE minute < ?`
	sqlBacklogPeaks = `SELECT minute, pending FROM keel_backlog WHERE minute >= ? ORDER BY minute`
	sqlFirstMinute  = `SELECT MIN(minute) FROM keel_minutes`
)

// RecordBacklog implements driver.BacklogStore.
func (d *Driver) RecordBacklog(ctx context.Context, s driver.BacklogSample) error {
	if err := s.Validate(); err != nil {
		return err
	}
	err := d.retry(ctx, func() error {
		if _, err := d.db.ExecContext(ctx, sqlRecordBacklog, s.Minute, s.Pending); err != nil {
			return err
		}
		if s.DropBefore > 0 {
			_, err := d.db.ExecContext(ctx, sqlDropBacklog, s.DropBefore)
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
func (d *Driver) BacklogPeaks(ctx context.Context, since int64) ([]driver.BacklogPeak, error) {
	out, err := sqlutil.Collect(sqlutil.Query(ctx, d.db, sqlBacklogPeaks, since), sqlutil.ScanBacklogPeak)
	if err != nil {
		return nil, fmt.Errorf("read backlog peaks: %w", err)
	}
	return out, nil
}

// FirstMinute implements driver.BacklogStore.
func (d *Driver) FirstMinute(ctx context.Context) (int64, bool, error) {
	return sqlutil.FirstMinute(d.db.QueryRowContext(ctx, sqlFirstMinute).Scan)
}

var _ driver.BacklogStore = (*Driver)(nil)
