package sqlite

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The backlog's peak per minute (keel_backlog, migration 015).

const (
	sqlRecordBacklog = `INSERT INTO keel_backlog (minute, pending) VALUES (?, ?)
ON CONFLICT (minute) DO UPDATE SET pending = max(pending, excluded.pending)`
	sqlDropBacklog  = `DELETE FROM keel_backlog WHERE minute < ?`
	sqlBacklogPeaks = `SELECT minute, pending FROM keel_backlog WHERE minute >= ? ORDER BY minute`
	sqlFirstMinute  = `SELECT min(minute) FROM keel_minutes`
)

var _ driver.BacklogStore = (*Driver)(nil)

// backlogSQL are the backlog statements of sqlutil.Ops.
var backlogSQL = sqlutil.BacklogSQL{Record: sqlRecordBacklog, Drop: sqlDropBacklog, Peaks: sqlBacklogPeaks, FirstMinute: sqlFirstMinute}
