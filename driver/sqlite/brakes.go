package sqlite

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The automatic brake's rows (keel_brakes, migration 011).

const sqlListBrakes = `SELECT ` + sqlutil.BrakeColumns + ` FROM keel_brakes ORDER BY type`

// sqlEnsureBrake gives a type without a row a closed one, so that a
// change from closed has a row to update.
const sqlEnsureBrake = `INSERT INTO keel_brakes (type, state, updated_at) VALUES (?, 'closed', ?)
ON CONFLICT (type) DO NOTHING`

const sqlChangeBrake = `UPDATE keel_brakes SET state = ?, opened_at = ?, open_until = ?, probe_task_id = ?,
	probe_owner = ?, probe_at = ?, probe_attempt = ?, ratio = ?, attempts = ?, reason = ?, closed_at = ?, updated_at = ?
WHERE type = ? AND state IN (?, ?, ?) AND (? OR coalesce(probe_owner, '') = ?)`

const sqlSetBrakeConfig = `UPDATE keel_brakes SET cfg_window = ?, cfg_threshold = ?, cfg_cooldown_ms = ?, updated_at = ?
WHERE type = ?`

var _ driver.Braker = (*Driver)(nil)

// brakeSQL are the brake statements of sqlutil.Ops.
var brakeSQL = sqlutil.BrakeSQL{List: sqlListBrakes, Ensure: sqlEnsureBrake, Change: sqlChangeBrake, SetConfig: sqlSetBrakeConfig,
	Scan: func(scan sqlutil.Scan) (*driver.BrakeRow, error) { return sqlutil.ScanBrake(scan, fromMicros) }}
