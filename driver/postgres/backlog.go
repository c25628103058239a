package postgres

import (
	"context"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The backlog's peak per minute (keel_backlog, migration 017).

const (
	sqlRecordBacklog = `INSERT INTO {schema}.keel_backlog (minute, pending) VALUES ($1, $2)
ON CONFLICT (minute) DO UPDATE SET pending = greatest(keel_backlog.pending, excluded.pending)`
	sqlDropBacklog  = `DELETE FROM {schema}.keel_backlog WHERE minute < $1`
	sqlBacklogPeaks = `SELECT minute, pending FROM {schema}.keel_backlog WHERE minute >= $1 ORDER BY minute`
	sqlFirstMinute  = `SELECT min(minute) FROM {schema}.keel_minutes`
)

// RecordBacklog implements driver.BacklogStore.
func (d *Driver) RecordBacklog(ctx context.Context, s driver.BacklogSample) error {
	if err := s.Validate(); err != nil {
		return err
	}
	q := pgxQuerier{db: d.pool}
	if _, err := q.exec(ctx, d.q(sqlRecordBacklog), []any{s.Minute, s.Pending}); err != nil {
		return fmt.Errorf("record backlog: %w", err)
	}
	if s.DropBefore > 0 {
		if _, err := q.exec(ctx, d.q(sqlDropBacklog), []any{s.DropBefore}); err != nil {
			return fmt.Errorf("record backlog: drop old minutes: %w", err)
		}
	}
	return nil
}

// BacklogPeaks implements driver.BacklogStore.
func (d *Driver) BacklogPeaks(ctx context.Context, since int64) ([]driver.BacklogPeak, error) {
	out, err := sqlutil.Collect(rowsOf(ctx, pgxQuerier{db: d.pool}, d.q(sqlBacklogPeaks), since), sqlutil.ScanBacklogPeak)
	if err != nil {
		return nil, fmt.Errorf("read backlog peaks: %w", err)
	}
	return out, nil
}

// FirstMinute implements driver.BacklogStore.
func (d *Driver) FirstMinute(ctx context.Context) (int64, bool, error) {
	m, ok, err := sqlutil.FirstMinute(d.pool.QueryRow(ctx, d.q(sqlFirstMinute)).Scan)
	return m, ok, unavailable(ctx, err)
}

var _ driver.BacklogStore = (*Driver)(nil)
