package sqlutil

import (
	"context"
	"database/sql"
	"time"
)

// Conn runs a driver's statements on one handle: its pool, a transaction
// of its own or a caller's, or SQLite's writer batch.
type Conn interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// Rows is the row loop of a query.
	Rows(ctx context.Context, query string, args ...any) Rows
}

// Run runs fn with one of a driver's statement handles Q, in the way the
// field of DB holding it says.
type Run[Q any] func(ctx context.Context, fn func(q Q) error) error

// DB is how the operations shared by the drivers (Ops) reach a driver's
// database. Q is the driver's statement handle: its pool, a transaction of
// its own or a caller's.
type DB[Q any] struct {
	// Pool runs single reads outside a transaction (SQLite: its readers).
	Pool Q
	// Lookup runs the reads of tasks by id or key, and List, outside a
	// transaction: the pool, planned for each call's values on PostgreSQL.
	Lookup Q
	// Read runs fn's reads in one read-only snapshot.
	Read Run[Q]
	// Write runs fn in one write transaction (SQLite: a group commit of
	// its single writer).
	Write Run[Q]
	// Commit is Write for a unit of work that must not commit once ctx
	// ended: a context that ended before the commit writes nothing
	// (SQLite's writer commits what it took, as Write).
	Commit Run[Q]
	// Do runs fn's one write statement on its own: SQLite's writer,
	// MySQL's pool run again after a deadlock, PostgreSQL's pool.
	Do Run[Q]
	// Conn runs statements on a handle.
	Conn func(q Q) Conn
	// Time is t as the database stores it.
	Time func(t time.Time) any
	// Mark is the placeholder of the nth argument (from 1).
	Mark func(n int) string
}

// Null is t as the database stores it, NULL when t is zero.
func (db DB[Q]) Null(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return db.Time(t)
}

// pool is the Conn of db's pool.
func (db DB[Q]) pool() Conn { return db.Conn(db.Pool) }

// exec runs query with run and returns the rows it affected.
func (db DB[Q]) exec(ctx context.Context, run Run[Q], query string, args ...any) (int64, error) {
	var n int64
	err := run(ctx, func(q Q) error {
		var err error
		n, err = db.Conn(q).Exec(ctx, query, args...)
		return err
	})
	return n, err
}

// SQL is the Conn of a database/sql handle.
func SQL(q Execer) Conn { return sqlConn{q: q} }

type sqlConn struct{ q Execer }

func (c sqlConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c sqlConn) Rows(ctx context.Context, query string, args ...any) Rows {
	return Query(ctx, c.q, query, args...)
}

// One reads the first row of rows with scan: nil when there is none.
func One[R any](rows Rows, scan func(Scan) (*R, error)) (*R, error) {
	out, err := Collect(rows, scan)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}

// ReadTx runs fn in a read-only transaction of db at the isolation level
// given (the database's default when zero): a Read of DB.
func ReadTx(ctx context.Context, db *sql.DB, level sql.IsolationLevel, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: level, ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to keep
	return fn(tx)
}
