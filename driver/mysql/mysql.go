// Package mysql is keel's MySQL 8 / MariaDB 10.6+ driver, built on
// go-sql-driver/mysql, for many worker processes on many machines sharing
// one database.
//
// MySQL has no UPDATE … RETURNING and no partial indexes, so the driver
// claims inside a short transaction (SELECT … FOR UPDATE SKIP LOCKED, then
// UPDATE those ids and read them back), finishes and heartbeats in batches
// the same way, and keeps idempotency keys unique with a generated column
// that is NULL outside the key-holding states. Deadlocks (error 1213) and
// lock-wait timeouts (1205) are retried inside the driver with a short
// backoff and counted (LockRetries); they never reach the engine as task
// failures. Timestamps are DATETIME(6) in UTC; leases and run times come
// from the database clock (UTC_TIMESTAMP(6)) unless Options.CallerClock is
// set. The tables live in the database the DSN names.
package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Options tunes the driver. The zero value is the documented default.
type Options struct {
	// CallerClock uses the Now the engine passes (its Config.Now) instead of
	// the database's UTC_TIMESTAMP(6) for every timestamp. Only for tests
	// that drive a fake clock. Default false: the database clock.
	CallerClock bool
	// MaxConns caps the driver's open connections. Default 10.
	MaxConns int
}

func (o Options) withDefaults() Options {
	if o.MaxConns == 0 {
		o.MaxConns = 10
	}
	return o
}

func (o Options) validate() error {
	if o.MaxConns < 0 {
		return errors.New("mysql: MaxConns must not be negative")
	}
	return nil
}

// Driver is the MySQL / MariaDB driver; it is safe for concurrent use.
type Driver struct {
	db          *sql.DB
	opts        Options
	idStep      int64 // @@auto_increment_increment
	lockRetries atomic.Int64

	// Ops are the methods shared with the other SQL drivers (shared.go).
	sqlutil.Ops[querier]
}

// Open connects to dsn, applies the migrations and returns the driver.
// dsn is a go-sql-driver DSN ("user:pass@tcp(host:3306)/db") or a URL
// ("mysql://user:pass@host:3306/db?param=value"); it must name a database.
// The driver forces parseTime=true, loc=UTC, time_zone='+00:00' and
// clientFoundRows=true on its connections, and sets interpolateParams=true
// unless the DSN sets it (see ParseDSN).
func Open(ctx context.Context, dsn string, opts Options) (*Driver, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db := sql.OpenDB(classifying{connector})
	db.SetMaxOpenConns(opts.MaxConns)
	db.SetMaxIdleConns(opts.MaxConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(connMaxLifetime)
	d := &Driver{db: db, opts: opts}
	d.Ops = sqlutil.NewOps(d.shared())
	if err := db.QueryRowContext(ctx, `SELECT @@auto_increment_increment`).Scan(&d.idStep); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: connect: %w", err)
	}
	if err := d.Migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return d, nil
}

// ParseDSN parses a go-sql-driver DSN or a mysql:// URL and applies the
// settings the driver needs (UTC times, clientFoundRows), and
// interpolateParams=true unless the DSN sets it.
func ParseDSN(dsn string) (*mysql.Config, error) {
	if dsn == "" {
		return nil, errors.New("mysql: empty DSN")
	}
	if strings.HasPrefix(dsn, "mysql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, fmt.Errorf("mysql: parse DSN: %w", err)
		}
		s := ""
		if u.User != nil {
			s = u.User.String() + "@"
		}
		host := u.Host
		if host == "" {
			host = "127.0.0.1:3306"
		}
		s += "tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/")
		if u.RawQuery != "" {
			s += "?" + u.RawQuery
		}
		dsn = s
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: parse DSN: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("mysql: the DSN must name a database")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if !strings.Contains(dsn, "interpolateParams=") {
		// Arguments go in the statement text (escaped by go-sql-driver)
		// unless the DSN says otherwise: one round trip per statement
		// instead of prepare, execute and close, and no server-side
		// prepare of a claim's or finish's hundreds of placeholders.
		// go-sql-driver refuses it for collations where escaping is
		// unsafe; those keep server-side prepares.
		c := cfg.Clone()
		c.InterpolateParams = true
		if _, err := mysql.NewConnector(c); err == nil {
			cfg = c
		}
	}
	return cfg, nil
}

// DB returns the driver's database handle: begin the *sql.Tx you pass to
// keel's EnqueueTx and CompleteTx on it.
func (d *Driver) DB() *sql.DB { return d.db }

// PoolStats reports the database/sql pool (driver.PoolStater).
func (d *Driver) PoolStats() driver.PoolStats {
	s := d.db.Stats()
	return driver.PoolStats{InUse: s.InUse, Idle: s.Idle, Max: s.MaxOpenConnections,
		WaitCount: s.WaitCount, WaitDuration: s.WaitDuration,
		MaxSetting: "mysql.Options.MaxConns (default 10; keel serve uses the default)"}
}

// LockRetries returns how many statements or transactions the driver has
// retried after a deadlock (1213) or lock-wait timeout (1205).
func (d *Driver) LockRetries() int64 { return d.lockRetries.Load() }

// Close closes the driver's connections.
func (d *Driver) Close() error { return d.db.Close() }

// now is the now argument of a statement: nil makes the SQL use the
// database clock.
func (d *Driver) now(t time.Time) any {
	if d.opts.CallerClock {
		return t
	}
	return nil
}

// offset is t relative to now in microseconds (sqlutil.Offset).
func offset(t, now time.Time) int64 { return sqlutil.Offset(t, now) }

// connMaxLifetime is how long the driver keeps a connection. Reconcile
// folds a connection's counter rows only once it has ended (see
// liveShards), so a busy pool's rows are folded at most this long after
// they were written.
const connMaxLifetime = 30 * time.Minute

// maxLockRetries is how often a deadlocked or timed-out unit of work is
// retried before its error is returned.
const maxLockRetries = 12

// isLockError reports whether err is a deadlock or lock-wait timeout, after
// which the whole transaction can simply run again.
func isLockError(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// isDuplicate reports whether err is a unique-key violation.
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// retry runs fn, running it again after a deadlock or lock-wait timeout
// with a short, growing, jittered backoff. An error after ctx ended also
// carries ctx's error (a dial cut short reports only "i/o timeout"), so
// callers can test it with errors.Is.
func (d *Driver) retry(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if cerr := ctxErr(ctx); err != nil && cerr != nil && !errors.Is(err, cerr) {
			return errors.Join(cerr, err)
		}
		if err == nil || attempt >= maxLockRetries || !isLockError(err) {
			return err
		}
		d.lockRetries.Add(1)
		wait := time.Millisecond << min(attempt, 6)
		wait += rand.N(wait)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// ctxErr is ctx's error, or DeadlineExceeded once its deadline passed even
// if ctx has not noticed yet (a dial fails at the deadline itself).
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// conn is a Conn whose errors after ctx ended also carry ctx's error (a
// dial cut short reports only "i/o timeout"), as retry's do.
type conn struct{ sqlutil.Conn }

func (c conn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	n, err := c.Conn.Exec(ctx, query, args...)
	return n, withCtxErr(ctx, err)
}

func (c conn) Rows(ctx context.Context, query string, args ...any) sqlutil.Rows {
	rows := c.Conn.Rows(ctx, query, args...)
	return func(row func(scan sqlutil.Scan) error) error { return withCtxErr(ctx, rows(row)) }
}

// withCtxErr joins ctx's error (see ctxErr) to err, unless err is nil or
// carries it already.
func withCtxErr(ctx context.Context, err error) error {
	if cerr := ctxErr(ctx); err != nil && cerr != nil && !errors.Is(err, cerr) {
		return errors.Join(cerr, err)
	}
	return err
}

// inTx runs fn in a READ COMMITTED transaction, retried as a whole after a
// deadlock or lock-wait timeout.
func (d *Driver) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return d.retry(ctx, func() error {
		tx, err := d.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			tx.Rollback() //nolint:errcheck // the first error is what matters
			return err
		}
		return tx.Commit()
	})
}

var (
	_ driver.Driver     = (*Driver)(nil)
	_ driver.DBer       = (*Driver)(nil)
	_ driver.PoolStater = (*Driver)(nil)
)

// querier is what the driver's SQL runs on: the pool, its own transaction
// or a caller's *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// callerTx accepts the transactions this driver can use: *sql.Tx.
func callerTx(tx driver.Tx) (*sql.Tx, error) {
	if t, ok := tx.(*sql.Tx); ok && t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("mysql: got %T, want a *sql.Tx: %w", tx, driver.ErrUnsupportedTx)
}
