package sqlutil

import (
	"context"

	"github.com/keelq/keel/driver"
)

// Ops are the driver.Driver methods whose logic the SQL drivers share: a
// driver embeds them with its DB and its statements, and defines for
// itself each method its database does differently.
type Ops[Q any] struct {
	DB  DB[Q]
	SQL Statements
	// Insert inserts tasks in the transaction q; after (nil: nothing) is
	// run once that transaction committed.
	Insert func(ctx context.Context, q Q, params []driver.InsertParams) (out []driver.InsertResult, after func(), err error)
	// Migrations applies the driver's pending migrations and reports every
	// known version.
	Migrations func(ctx context.Context) ([]driver.Migration, error)
}

// Statements are a driver's SQL for Ops, by concern.
type Statements struct {
	Alerts    AlertSQL
	Brakes    BrakeSQL
	Schedules ScheduleSQL
	Backlog   BacklogSQL
	Nodes     NodeSQL
}
