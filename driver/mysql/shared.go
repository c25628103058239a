package mysql

import (
	"context"
	"database/sql"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// shared are the operations this driver shares with the others
// (sqlutil.Ops), with its statements and its way to the database: the
// pool, READ COMMITTED transactions and single statements, each run again
// after a deadlock, times in UTC.
func (d *Driver) shared() sqlutil.Ops[querier] {
	tx := func(ctx context.Context, fn func(q querier) error) error {
		return d.inTx(ctx, func(tx *sql.Tx) error { return fn(tx) })
	}
	return sqlutil.Ops[querier]{
		DB: sqlutil.DB[querier]{
			Pool: d.db,
			Read: func(ctx context.Context, fn func(q querier) error) error {
				return d.read(ctx, func(tx *sql.Tx) error { return fn(tx) })
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
			Conn: func(q querier) sqlutil.Conn { return sqlutil.SQL(q) },
			Time: func(t time.Time) any { return t.UTC() },
			Mark: sqlutil.Question,
		},
		SQL: sqlutil.Statements[querier]{Alerts: alertSQL, Brakes: brakeSQL, Schedules: scheduleSQL, Backlog: backlogSQL,
			Nodes: d.nodeSQL(), Limits: d.limitSQL(),
			Archive: d.archiveSQL(), Sources: sourceSQL, Requests: requestSQL},
		ApplyMigrations: d.Migrations,
		ClaimIn:         d.claimTx,
		InsertIn: func(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, func(), error) {
			out, err := d.insert(ctx, q, params)
			return out, nil, err
		},
	}
}
