package postgres

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// shared is how the operations this driver shares with the others
// (sqlutil.Ops) run here: its statements (templates naming {schema}), the
// pool and its transactions, times as they are.
func (d *Driver) shared() sqlutil.OpsConfig[querier] {
	return sqlutil.OpsConfig[querier]{
		DB: sqlutil.DB[querier]{
			Pool: pgxQuerier{db: d.pool}, Lookup: pgxQuerier{db: d.pool}.byID(),
			Read: d.read,
			Write: func(ctx context.Context, fn func(q querier) error) error {
				return beginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(pgxQuerier{db: tx}) })
			},
			Commit: d.scheduleTx,
			Do:     func(ctx context.Context, fn func(q querier) error) error { return fn(pgxQuerier{db: d.pool}.byID()) },
			Conn:   func(q querier) sqlutil.Conn { return pgConn{q: q, d: d} },
			Time:   func(t time.Time) any { return t },
			Mark:   func(n int) string { return "$" + strconv.Itoa(n) },
		},
		SQL: sqlutil.Statements[querier]{Alerts: alertSQL, Brakes: brakeSQL, Schedules: scheduleSQL, Backlog: backlogSQL,
			Nodes: d.nodeSQL(), Limits: d.limitSQL(),
			Archive: d.archiveSQL(), Sources: d.sourceSQL(), Requests: requestSQL,
			Tasks: d.taskSQL(), Admin: d.adminSQL(),
			Counters: sqlutil.CounterSQL{Counts: d.sql.counts, Minutes: d.sql.minutes},
			Batches:  batchSQL, Sequences: sequenceSQL, Workflows: d.workflowSQL()},
		ApplyMigrations: d.Migrations,
		CallerTx:        callerTx,
		// Visible only when the caller commits: a notification for all.
		InsertCaller: func(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, error) {
			out, _, err := d.insertNotify(ctx, q, params, false)
			return out, err
		},
		ClaimOn: func(ctx context.Context, fn func(q querier) error) error { return fn(pgxQuerier{db: d.pool}) },
		ClaimIn: d.claim,
		Now:     d.txNow,
		Notify: func(ctx context.Context, q querier, queues []string) error {
			return d.notifyQueues(ctx, q, queues, false)
		},
		InsertIn: func(ctx context.Context, q querier, params []driver.InsertParams) ([]driver.InsertResult, func(), error) {
			out, queues, err := d.insertNotify(ctx, q, params, true)
			return out, func() { d.wakeLocal(queues) }, err
		},
	}
}

// pgConn runs statement templates on q.
type pgConn struct {
	q querier
	d *Driver
}

func (c pgConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return c.q.exec(ctx, c.d.q(query), args)
}

func (c pgConn) Rows(ctx context.Context, query string, args ...any) sqlutil.Rows {
	return rowsOf(ctx, c.q, c.d.q(query), args...)
}
