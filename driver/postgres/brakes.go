package postgres

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The automatic brake's rows (keel_brakes, migration 013).

const sqlListBrakes = `SELECT ` + sqlutil.BrakeColumns + ` FROM {schema}.keel_brakes ORDER BY type`

// sqlEnsureBrake gives a type without a row a closed one, so that a
// change from closed has a row to update.
const sqlEnsureBrake = `INSERT INTO {schema}.keel_brakes (type, state, updated_at) VALUES ($1, 'closed', $2)
ON CONFLICT (type) DO NOTHING`

const sqlChangeBrake = `UPDATE {schema}.keel_brakes SET state = $1, opened_at = $2, open_until = $3,
	probe_task_id = $4, probe_owner = $5, probe_at = $6, probe_attempt = $7, ratio = $8, attempts = $9,
	reason = $10, closed_at = $11, updated_at = $12
WHERE type = $13 AND state IN ($14, $15, $16) AND ($17::boolean OR coalesce(probe_owner, '') = $18)`

const sqlSetBrakeConfig = `UPDATE {schema}.keel_brakes SET cfg_window = $1, cfg_threshold = $2, cfg_cooldown_ms = $3,
	updated_at = $4 WHERE type = $5`

var _ driver.Braker = (*Driver)(nil)

// brakeSQL are the brake statements of sqlutil.Ops.
var brakeSQL = sqlutil.BrakeSQL{List: sqlListBrakes, Ensure: sqlEnsureBrake, Change: sqlChangeBrake, SetConfig: sqlSetBrakeConfig,
	Scan: func(scan sqlutil.Scan) (*driver.BrakeRow, error) { return sqlutil.ScanBrake(scan, sqlutil.UTC) }}
