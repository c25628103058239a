package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// shared is how the operations this driver shares with the others
// (sqlutil.Ops) run here: its statements, reads on the reader pool, every
// write through the single writer, times as Unix microseconds.
func (d *Driver) shared() sqlutil.OpsConfig[querier] {
	write := func(ctx context.Context, fn func(q querier) error) error { return d.write(ctx, fn) }
	return sqlutil.OpsConfig[querier]{
		DB: sqlutil.DB[querier]{
			Pool: d.rdb, Lookup: d.rdb,
			Read: func(ctx context.Context, fn func(q querier) error) error {
				return sqlutil.ReadTx(ctx, d.rdb, sql.LevelDefault, func(tx *sql.Tx) error { return fn(tx) })
			},
			Write: write, Commit: write, Do: write,
			Conn: func(q querier) sqlutil.Conn { return sqlutil.SQL(q) },
			Time: func(t time.Time) any { return micros(t) },
			Mark: sqlutil.Question,
		},
		SQL: sqlutil.Statements[querier]{Alerts: alertSQL, Brakes: brakeSQL, Schedules: scheduleSQL, Backlog: backlogSQL,
			Nodes: d.nodeSQL(), Limits: d.limitSQL(),
			Archive: archiveSQL, Sources: sourceSQL, Requests: requestSQL,
			Tasks: d.taskSQL(), Admin: adminSQL,
			Counters: sqlutil.CounterSQL{Counts: sqlCounts, Minutes: sqlMinutes},
			Batches:  batchSQL, Sequences: sequenceSQL, Workflows: d.workflowSQL()},
		ApplyMigrations: d.Migrations,
		Count:           count,
		CallerTx:        func(dtx driver.Tx) (querier, error) { return callerTx(dtx) },
		InsertCaller:    insert,
		ClaimOn:         write,
		ClaimIn:         d.claimCounted,
		InsertIn: func(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, func(), error) {
			out, err := insert(ctx, q, params)
			return out, nil, err
		},
	}
}
