package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// querier runs the driver's SQL on the pool, a pgx.Tx or a caller's
// *sql.Tx (pgx stdlib), so one implementation of each query serves all.
type querier interface {
	// query calls row for each result row with a scan function.
	query(ctx context.Context, sql string, args []any, row func(scan func(dest ...any) error) error) error
	exec(ctx context.Context, sql string, args []any) (int64, error)
	// byID returns a querier for statements that look tasks up by id.
	byID() querier
}

// pgxQuerier adapts a pool, connection or pgx.Tx.
type pgxQuerier struct {
	db interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	}
	// planEach has PostgreSQL plan each execution with its arguments
	// instead of reusing a generic plan (see byID).
	planEach bool
}

// byID plans each execution. A statement prepared while the task table was
// small gets a generic plan that reads the table through (a sequential
// scan, when the ids are an array) and keeps it on that connection as the
// table grows, unless VACUUM or ANALYZE invalidates it: finishing a batch
// took 2 ms instead of 0.13 ms on a table of 10,000 tasks with autovacuum
// off. Planning such a statement costs about 0.15 ms of server time; the
// claim, whose plan does not depend on the table's size, keeps its cached
// plan.
func (q pgxQuerier) byID() querier {
	q.planEach = true
	return q
}

func (q pgxQuerier) args(args []any) []any {
	if q.planEach {
		return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
	}
	return args
}

func (q pgxQuerier) query(ctx context.Context, sql string, args []any, row func(scan func(dest ...any) error) error) error {
	rows, err := q.db.Query(ctx, sql, q.args(args)...)
	if err != nil {
		return unavailable(ctx, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return unavailable(ctx, rows.Err())
}

func (q pgxQuerier) exec(ctx context.Context, sql string, args []any) (int64, error) {
	tag, err := q.db.Exec(ctx, sql, q.args(args)...)
	return tag.RowsAffected(), unavailable(ctx, err)
}

// unavailable wraps err with driver.ErrUnavailable when it says the server
// could not be reached, is shutting down or starting up (SQLSTATE class 08,
// 57P01, 57P02, 57P03; see driver.Unreachable); the original error stays
// visible to errors.As. The driver's statements and transactions return
// their errors through it.
func unavailable(ctx context.Context, err error) error { return driver.Unavailable(ctx, err, nil) }

// beginFunc is pgx.BeginFunc with the driver's error classification: a
// commit cut short by a lost connection is driver.ErrUnavailable.
func beginFunc(ctx context.Context, db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}, fn func(pgx.Tx) error) error {
	return unavailable(ctx, pgx.BeginFunc(ctx, db, fn))
}

// beginTxFunc is pgx.BeginTxFunc with the driver's error classification.
func beginTxFunc(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	return unavailable(ctx, pgx.BeginTxFunc(ctx, db, opts, fn))
}

// sqlQuerier adapts a caller's *sql.Tx on the pgx stdlib driver.
type sqlQuerier struct{ tx *sql.Tx }

// byID leaves planning to the caller's connection settings: database/sql
// has no per-statement execution mode.
func (q sqlQuerier) byID() querier { return q }

func (q sqlQuerier) query(ctx context.Context, query string, args []any, row func(scan func(dest ...any) error) error) error {
	return sqlutil.Query(ctx, q.tx, query, args...)(row)
}

func (q sqlQuerier) exec(ctx context.Context, query string, args []any) (int64, error) {
	res, err := q.tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// callerTx accepts the transactions this driver can use: pgx.Tx and
// *sql.Tx (pgx stdlib, for example from DB()).
func callerTx(tx driver.Tx) (querier, error) {
	switch t := tx.(type) {
	case pgx.Tx:
		if t != nil {
			return pgxQuerier{db: t}, nil
		}
	case *sql.Tx:
		if t != nil {
			return sqlQuerier{tx: t}, nil
		}
	}
	return nil, fmt.Errorf("postgres: got %T, want a pgx.Tx or a *sql.Tx: %w", tx, driver.ErrUnsupportedTx)
}

// maxTxAttempts is how often a transaction of the driver's own runs in all
// when it fails with a deadlock or serialization failure.
const maxTxAttempts = 8

// retryable reports whether err is a deadlock (40P01) or serialization
// failure (40001), after which the whole transaction can simply run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// backoff waits before attempt+2 of a transaction: a short, growing,
// jittered pause, cut short by ctx.
func backoff(ctx context.Context, attempt int) error {
	wait := time.Millisecond << min(attempt, 6)
	wait += rand.N(wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
