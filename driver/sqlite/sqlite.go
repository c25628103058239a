// Package sqlite is keel's embedded storage driver, built on the pure-Go
// modernc.org/sqlite (no cgo) by default. Built with the keel_cgo_sqlite
// tag (go build -tags keel_cgo_sqlite, which needs cgo and a C compiler)
// it runs over the C SQLite of github.com/mattn/go-sqlite3 instead: the
// same driver code, only the connection's DSN, the reading of error codes
// and the name in Build differ (conn_modernc.go, conn_cgo.go).
//
// The database runs in WAL mode with synchronous=FULL by default, so an
// enqueue that returned survives a power loss. All writes of a process go
// through one writer connection that commits them in groups (group commit);
// reads use a small pool of read-only connections. Several processes may
// share one file: they serialise on SQLite's write lock with a busy timeout,
// take turns at it (gate.go) and wake each other through polling.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// Synchronous is SQLite's durability setting for the WAL.
type Synchronous string

const (
	// SyncFull fsyncs the WAL on every commit: a returned enqueue survives
	// power loss. The default.
	SyncFull Synchronous = "FULL"
	// SyncNormal fsyncs only at checkpoints: faster, and still safe against
	// process crashes, but the last commits can be lost on power loss.
	SyncNormal Synchronous = "NORMAL"
)

// Options tunes the driver. The zero value is the documented default.
type Options struct {
	// Synchronous is the WAL durability level. Default SyncFull.
	Synchronous Synchronous
	// BusyTimeout is how long a connection waits for another process's write
	// lock before failing. Default 10s.
	BusyTimeout time.Duration
	// Readers is the size of the read-only connection pool. Default 4.
	Readers int
	// MaxBatch is the most operations one group commit carries. Default 512.
	MaxBatch int
	// Linger is how long a lone write waits for others to share its commit;
	// negative disables it, at most 10ms. Default 100µs.
	Linger time.Duration
	// CallerClock writes leases exactly as the engine stamps them. Without
	// it (the default), a claim's or a renewal's lease counts from when its
	// statement runs, as on PostgreSQL and MariaDB: the time the write
	// waited for its turn at the file (other processes' writes, this
	// process's queue) is added, so a lease cannot run out before it is
	// written. Tests that drive the driver with a fixed clock set it.
	CallerClock bool
}

func (o Options) withDefaults() Options {
	if o.Synchronous == "" {
		o.Synchronous = SyncFull
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = 10 * time.Second
	}
	if o.Readers == 0 {
		o.Readers = 4
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 512
	}
	if o.Linger == 0 {
		o.Linger = 100 * time.Microsecond
	}
	return o
}

func (o Options) validate() error {
	switch o.Synchronous {
	case SyncFull, SyncNormal:
	default:
		return fmt.Errorf("sqlite: Synchronous must be FULL or NORMAL, got %q", o.Synchronous)
	}
	if o.BusyTimeout < 0 {
		return errors.New("sqlite: BusyTimeout must not be negative")
	}
	if o.Linger > 10*time.Millisecond {
		return fmt.Errorf("sqlite: Linger must be at most 10ms, got %v", o.Linger)
	}
	if o.Readers < 0 || o.MaxBatch < 0 {
		return errors.New("sqlite: Readers and MaxBatch must not be negative")
	}
	return nil
}

// Driver is the SQLite driver. Create it with Open; it is safe for
// concurrent use.
type Driver struct {
	path string
	opts Options
	wdb  *sql.DB // one connection: keel's own writes (the writer)
	cdb  *sql.DB // one connection: callers' transactions (DB()), in turns with wdb
	rdb  *sql.DB // read-only pool
	gate *gate   // the writers' turns at the file's write lock (gate.go); nil: none
	now  func() time.Time

	stmts map[string]*sql.Stmt // hot-path statements prepared at Open; read-only after
	// variedStmts are the statements whose text varies with their rows
	// (counter upserts, multi-row inserts), prepared by the writer
	// (variedStmt); only the writer touches them until Close.
	variedStmts  map[string]*sql.Stmt
	variedWanted []string         // to prepare after the batch (variedStmt)
	claimBuf     []driver.TaskRow // the writer's buffer for claimed rows (claim)

	ops       chan *op
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// Ops are the methods shared with the other SQL drivers (shared.go).
	sqlutil.Ops[querier]
}

// Open opens (creating if needed) the database file at path and applies the
// migrations.
func Open(ctx context.Context, path string, opts Options) (*Driver, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	// The writer turns the file to WAL (enterWAL) before anything else
	// opens it; a connection opened later finds it in WAL mode (it is
	// kept in the file), and the readers' pragma only confirms it.
	common := connSettings{busy: opts.BusyTimeout, sync: opts.Synchronous, foreignKeys: true}
	// temp_store(MEMORY) keeps the writer's statement journals (the undo
	// of one statement inside a group commit, never needed after it) off
	// a temporary file: a multi-row claim or finish otherwise pays a
	// write(2) per page it changes. Durability is the WAL's, unchanged.
	ws := common
	ws.tempMemory, ws.immediate = true, true
	g, t := openGate(path), newTurns()
	// One connection each for keel's writer and for callers (DB()), taking
	// turns (turns.go).
	writing := func(r role) (*sql.DB, error) {
		conn, err := newGatedConnector(path, ws, g, min(gatePatience, opts.BusyTimeout), t, r)
		if err != nil {
			return nil, err
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		return db, nil
	}
	wdb, err := writing(roleWriter)
	if err != nil {
		g.close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := enterWAL(ctx, wdb, opts.BusyTimeout); err != nil {
		wdb.Close()
		g.close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	cdb, err := writing(roleCaller)
	if err != nil {
		wdb.Close()
		g.close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	rs := common
	rs.journal, rs.queryOnly = "WAL", true
	rdb, err := openDB(path, rs)
	if err != nil {
		wdb.Close()
		cdb.Close()
		g.close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(opts.Readers)
	rdb.SetMaxIdleConns(opts.Readers)
	d := &Driver{
		path: path, opts: opts, wdb: wdb, cdb: cdb, rdb: rdb, gate: g, now: time.Now,
		ops:  make(chan *op, opts.MaxBatch),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	d.Ops = sqlutil.NewOps(d.shared())
	if err := d.Migrate(ctx); err != nil {
		wdb.Close()
		cdb.Close()
		rdb.Close()
		d.gate.close()
		return nil, err
	}
	d.stmts = map[string]*sql.Stmt{}
	for _, q := range hotQueries {
		s, err := wdb.PrepareContext(ctx, q)
		if err != nil {
			for _, s := range d.stmts {
				s.Close()
			}
			wdb.Close()
			cdb.Close()
			rdb.Close()
			d.gate.close()
			return nil, fmt.Errorf("sqlite: prepare: %w", err)
		}
		d.stmts[q] = s
	}
	go d.writeLoop()
	return d, nil
}

// enterWAL turns the file to WAL mode, waiting up to busy for other
// processes doing the same or migrating a new file. The busy timeout alone
// does not wait here: turning a file to WAL reads its header, then asks
// to write it, and SQLite answers a reader that asks to write while
// another connection writes with SQLITE_BUSY at once, without the busy
// handler (it would deadlock otherwise). So processes started together
// on a new file failed with "database is locked".
func enterWAL(ctx context.Context, db *sql.DB, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		var mode string
		err := db.QueryRowContext(ctx, `PRAGMA journal_mode=WAL`).Scan(&mode)
		switch {
		case err == nil && strings.EqualFold(mode, "wal"):
			return nil
		case err == nil:
			return fmt.Errorf("journal_mode is %q: the file system does not support WAL", mode)
		case !isBusy(err) || time.Now().After(deadline):
			return fmt.Errorf("set WAL mode: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("set WAL mode: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	code, ok := errCode(err)
	return ok && code&0xff == sqliteBusy
}

// sqliteBusy is SQLITE_BUSY, "database is locked".
const sqliteBusy = 5

// DB returns the callers' writing handle, one connection. Begin the
// transactions you pass to keel's EnqueueTx and CompleteTx on it: SQLite
// has one writer at a time, and this connection's transactions take turns
// with keel's own writes (a waiting transaction goes first until keel's
// writer has waited 20ms; see turns.go), where a transaction on another
// connection would wait on SQLite's busy handler.
func (d *Driver) DB() *sql.DB { return d.cdb }

// Path returns the database file path.
func (d *Driver) Path() string { return d.path }

// GroupCommits implements driver.GroupCommitter: concurrent writes share
// the single writer's commit.
func (d *Driver) GroupCommits() bool { return true }

// Close stops the writer and closes the connections.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		close(d.stop)
		<-d.done
	})
	for _, s := range d.stmts {
		s.Close()
	}
	for _, s := range d.variedStmts {
		s.Close()
	}
	d.gate.close()
	return errors.Join(d.wdb.Close(), d.cdb.Close(), d.rdb.Close())
}

// PoolStats reports the two writing connections and the read-only pool
// together (driver.PoolStater): Max is 2 + Options.Readers.
func (d *Driver) PoolStats() driver.PoolStats {
	w, c, r := d.wdb.Stats(), d.cdb.Stats(), d.rdb.Stats()
	return driver.PoolStats{InUse: w.InUse + c.InUse + r.InUse, Idle: w.Idle + c.Idle + r.Idle,
		Max:       w.MaxOpenConnections + c.MaxOpenConnections + r.MaxOpenConnections,
		WaitCount: w.WaitCount + c.WaitCount + r.WaitCount, WaitDuration: w.WaitDuration + c.WaitDuration + r.WaitDuration,
		MaxSetting: "sqlite.Options.Readers (the read pool, default 4; keel's writes and callers' transactions have one connection each)"}
}

var (
	_ driver.Driver     = (*Driver)(nil)
	_ driver.PoolStater = (*Driver)(nil)
)
