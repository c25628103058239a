package postgres

import (
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

var _ driver.BacklogStore = (*Driver)(nil)

// backlogSQL are the backlog statements of sqlutil.Ops.
var backlogSQL = sqlutil.BacklogSQL{Record: sqlRecordBacklog, Drop: sqlDropBacklog, Peaks: sqlBacklogPeaks, FirstMinute: sqlFirstMinute}
