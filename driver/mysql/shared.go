package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// shared is how the operations this driver shares with the others
// (sqlutil.Ops) run here: its statements, the pool, READ COMMITTED
// transactions and single statements, each run again after a deadlock,
// times in UTC.
func (d *Driver) shared() sqlutil.OpsConfig[querier] {
	tx := func(ctx context.Context, fn func(q querier) error) error {
		return d.inTx(ctx, func(tx *sql.Tx) error { return fn(tx) })
	}
	return sqlutil.OpsConfig[querier]{
		DB: sqlutil.DB[querier]{
			Pool: d.db, Lookup: d.db,
			Read: func(ctx context.Context, fn func(q querier) error) error {
				// One REPEATABLE READ snapshot.
				return sqlutil.ReadTx(ctx, d.db, sql.LevelRepeatableRead, func(tx *sql.Tx) error { return fn(tx) })
			},
			Write: tx,
			Commit: func(ctx context.Context, fn func(q querier) error) error {
				return tx(ctx, func(q querier) error {
					if err := fn(q); err != nil {
						return err
					}
					return ctx.Err()
				})
			},
			Do: func(ctx context.Context, fn func(q querier) error) error {
				return d.retry(ctx, func() error { return fn(d.db) })
			},
			Conn: func(q querier) sqlutil.Conn { return conn{sqlutil.SQL(q)} },
			Time: func(t time.Time) any { return t.UTC() },
			Mark: sqlutil.Question,
		},
		SQL: sqlutil.Statements[querier]{Alerts: alertSQL, Brakes: brakeSQL, Schedules: scheduleSQL, Backlog: backlogSQL,
			Nodes: d.nodeSQL(), Limits: d.limitSQL(),
			Archive: d.archiveSQL(), Sources: sourceSQL, Requests: requestSQL,
			Tasks: d.taskSQL(), Admin: d.adminSQL(),
			Counters: sqlutil.CounterSQL{Counts: sqlCounts, Minutes: sqlMinutes},
			Batches:  batchSQL, Sequences: sequenceSQL, Workflows: d.workflowSQL()},
		ApplyMigrations: d.Migrations,
		Count:           count,
		Now:             d.txNow,
		CallerTx:        func(dtx driver.Tx) (querier, error) { return callerTx(dtx) },
		InsertCaller:    d.insert,
		ClaimOn: func(ctx context.Context, fn func(q querier) error) error {
			if err := tx(ctx, fn); err != nil {
				return fmt.Errorf("claim tasks: %w", err)
			}
			return nil
		},
		ClaimIn: d.claimTx,
		InsertIn: func(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, func(), error) {
			out, err := d.insert(ctx, q, params)
			return out, nil, err
		},
	}
}
