// Package postgres is keel's PostgreSQL driver, built on pgx/v5 and
// pgxpool, for many worker processes on many machines sharing one
// database.
//
// Claims take rows with FOR UPDATE SKIP LOCKED in one statement that also
// marks them running; successes are finished in one statement per batch;
// leases are renewed in one statement per process. Timestamps for leases
// and run times come from the database clock (now()), never from a
// worker's, unless Options.CallerClock is set (tests with a fake clock).
// All tables live in Options.Schema, so several applications can share a
// database. Workers are woken across processes with LISTEN/NOTIFY on one
// of the pool's connections, held while a client on the driver is started
// (see Listen).
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Options tunes the driver. The zero value is the documented default.
type Options struct {
	// Schema holds keel's tables; it is created if missing. Default "keel".
	Schema string
	// CallerClock uses the Now the engine passes (its Config.Now) instead of
	// the database's now() for every timestamp. Only for tests that drive a
	// fake clock. Default false: the database clock.
	CallerClock bool
}

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (o Options) withDefaults() Options {
	if o.Schema == "" {
		o.Schema = "keel"
	}
	return o
}

func (o Options) validate() error {
	if !schemaPattern.MatchString(o.Schema) {
		return fmt.Errorf("postgres: invalid schema name %q: use 1-63 lower-case letters, digits and '_'", o.Schema)
	}
	return nil
}

// Driver is the PostgreSQL driver; it is safe for concurrent use.
type Driver struct {
	pool     *pgxpool.Pool
	ownsPool bool
	schema   string // quoted identifier
	opts     Options
	sql      queries
	db       *sql.DB // lazily opened database/sql view of the pool
	wakes    wakeHub
	maint    maintState // what Maintain remembers between calls

	// Ops are the methods shared with the other SQL drivers (shared.go).
	sqlutil.Ops[querier]
}

// Open connects to dsn (a postgres:// URL or key=value string), applies the
// migrations and returns the driver. Close closes the pool.
func Open(ctx context.Context, dsn string, opts Options) (*Driver, error) {
	if dsn == "" {
		return nil, errors.New("postgres: empty DSN")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse DSN: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	d, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	d.ownsPool = true
	return d, nil
}

// New returns a driver on the caller's pool (which Close leaves open) and
// applies the migrations.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Driver, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	d := &Driver{pool: pool, opts: opts, schema: pgx.Identifier{opts.Schema}.Sanitize(), wakes: wakeHub{token: newToken()}}
	if _, err := d.Migrations(ctx); err != nil {
		return nil, err
	}
	var seq string
	if err := pool.QueryRow(ctx, `SELECT pg_get_serial_sequence($1, 'id')`, d.schema+".keel_tasks").Scan(&seq); err != nil {
		return nil, fmt.Errorf("postgres: find the task id sequence: %w", err)
	}
	d.sql = newQueries(d.q, seq)
	d.Ops = sqlutil.NewOps(d.shared())
	d.db = stdlib.OpenDBFromPool(pool)
	return d, nil
}

// q puts the schema into a query template.
func (d *Driver) q(tmpl string) string { return strings.ReplaceAll(tmpl, "{schema}", d.schema) }

// Pool returns the driver's connection pool: begin the pgx.Tx you pass to
// keel's EnqueueTx and CompleteTx on it. While a client on the driver is
// started, one of its connections listens for wake-ups (see Listen).
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// DB returns a database/sql handle on the same pool (pgx's stdlib driver),
// for callers whose transactions are *sql.Tx.
func (d *Driver) DB() *sql.DB { return d.db }

// Schema returns the schema keel's tables live in.
func (d *Driver) Schema() string { return d.opts.Schema }

// Close ends the driver's listening session (see Listen), closes the
// database/sql handle and, if Open created it, the pool.
func (d *Driver) Close() error {
	d.stopListening()
	err := d.db.Close()
	if d.ownsPool {
		d.pool.Close()
	}
	return err
}

// now is the $now argument: nil makes the SQL use the database clock.
func (d *Driver) now(t time.Time) any {
	if d.opts.CallerClock {
		return t
	}
	return nil
}

// offset is t relative to now in microseconds (sqlutil.Offset).
func offset(t, now time.Time) int64 { return sqlutil.Offset(t, now) }

// PoolStats reports the pgx pool (driver.PoolStater). While a client on
// the driver is started, one connection is in use by the listener.
// WaitCount counts acquisitions that found no idle connection (including
// those that waited for a new connection to open) once they end, and
// those cancelled, which gave up waiting; WaitDuration sums the waits of
// the first kind.
func (d *Driver) PoolStats() driver.PoolStats {
	s := d.pool.Stat()
	return driver.PoolStats{InUse: int(s.AcquiredConns()), Idle: int(s.IdleConns()), Max: int(s.MaxConns()),
		WaitCount: s.EmptyAcquireCount() + s.CanceledAcquireCount(), WaitDuration: s.EmptyAcquireWaitTime(),
		MaxSetting: "the DSN parameter pool_max_conns (default: 4 or the CPU count, whichever is larger)"}
}

var (
	_ driver.Driver     = (*Driver)(nil)
	_ driver.DBer       = (*Driver)(nil)
	_ driver.PoolStater = (*Driver)(nil)
)

// Vacuum runs VACUUM (ANALYZE) on keel's task table. The migrations tune
// autovacuum for a queue's churn, and where autovacuum is off the leader
// vacuums (see Maintain); call Vacuum yourself after bulk work that should
// not wait for either.
func (d *Driver) Vacuum(ctx context.Context) error {
	if _, err := d.pool.Exec(ctx, d.q(`VACUUM (ANALYZE) {schema}.keel_tasks`)); err != nil {
		return fmt.Errorf("postgres: vacuum: %w", err)
	}
	return nil
}

// Checkpoint forces a PostgreSQL checkpoint (CHECKPOINT needs a superuser
// or the pg_checkpoint role). keel bench runs it before each measured
// phase, so that a checkpoint forced by the WAL of the set-up does not
// land in the measurement.
func (d *Driver) Checkpoint(ctx context.Context) error {
	if _, err := d.pool.Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("postgres: checkpoint: %w", err)
	}
	return nil
}
