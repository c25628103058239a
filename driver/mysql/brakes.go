package mysql

import (
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The automatic brake's rows (keel_brakes, migration 011).

// sqlEnsureBrake gives a type without a row a closed one, so that a
// change from closed has a row to update.
const sqlEnsureBrake = `INSERT IGNORE INTO keel_brakes (type, state, updated_at) VALUES (?, 'closed', ?)`

var _ driver.Braker = (*Driver)(nil)

// brakeSQL are the brake statements of sqlutil.Ops.
var brakeSQL = sqlutil.BrakeSQL{List: sqlutil.QListBrakes, Ensure: sqlEnsureBrake, Change: sqlutil.QChangeBrake,
	SetConfig: sqlutil.QSetBrakeConfig,
	Scan:      func(scan sqlutil.Scan) (*driver.BrakeRow, error) { return sqlutil.ScanBrake(scan, sqlutil.UTC) }}
