// Package sqlite is keel's embedded storage driver, built on the pure-Go
// modernc.org/sqlite (no cgo).
//
// The database runs in WAL mode with synchronous=FULL by default, so an
// enqueue that returned survives a power loss. All writes of a process go
// through one writer connection that commits them in groups (group commit);
// reads use a small pool of read-only connections. Several processes may
// share one file: they serialise on SQLite's write lock with a busy timeout
// and wake each other through polling.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/keelq/keel/driver"
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
	wdb  *sql.DB // one connection: every write goes through it
	rdb  *sql.DB // read-only pool
	now  func() time.Time

	stmts map[string]*sql.Stmt // hot-path statements prepared at Open; read-only after

	ops       chan *op
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
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
	base := "file:" + (&url.URL{Path: path}).EscapedPath()
	pragmas := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(%s)&_pragma=foreign_keys(1)",
		opts.BusyTimeout.Milliseconds(), opts.Synchronous)
	wdb, err := sql.Open("sqlite", base+"?"+pragmas+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	rdb, err := sql.Open("sqlite", base+"?"+pragmas+"&_pragma=query_only(1)")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(opts.Readers)
	rdb.SetMaxIdleConns(opts.Readers)
	d := &Driver{
		path: path, opts: opts, wdb: wdb, rdb: rdb, now: time.Now,
		ops:  make(chan *op, opts.MaxBatch),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if err := d.Migrate(ctx); err != nil {
		wdb.Close()
		rdb.Close()
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
			rdb.Close()
			return nil, fmt.Errorf("sqlite: prepare: %w", err)
		}
		d.stmts[q] = s
	}
	go d.writeLoop()
	return d, nil
}

// DB returns the writer handle. Begin the transactions you pass to
// keel's EnqueueTx and CompleteTx on it: SQLite has one writer, so a
// transaction on another connection would wait for keel's.
func (d *Driver) DB() *sql.DB { return d.wdb }

// Path returns the database file path.
func (d *Driver) Path() string { return d.path }

// Close stops the writer and closes the connections.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		close(d.stop)
		<-d.done
	})
	for _, s := range d.stmts {
		s.Close()
	}
	return errors.Join(d.wdb.Close(), d.rdb.Close())
}

// op is one write waiting for the next group commit. fn runs inside the
// batch transaction and reports only database errors; its own outcome is
// kept in its closure.
type op struct {
	fn   func(tx querier) error
	done chan error
	// state moves from queued to taken (by the writer) or abandoned (by a
	// caller whose context ended first): exactly one side wins.
	state atomic.Int32
}

const (
	opQueued int32 = iota
	opTaken
	opAbandoned
)

var errClosed = errors.New("sqlite: driver closed")

// write runs fn in the next group commit and waits for it to be durable.
// If ctx ends before the writer takes the operation, it returns ctx's error
// and nothing is written; once taken, it waits for the commit.
func (d *Driver) write(ctx context.Context, fn func(tx querier) error) error {
	o := &op{fn: fn, done: make(chan error, 1)}
	select {
	case d.ops <- o:
	case <-d.stop:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		if o.state.CompareAndSwap(opQueued, opAbandoned) {
			return ctx.Err()
		}
		select {
		case err := <-o.done:
			return err
		case <-d.done:
		}
	case <-d.done:
	}
	select {
	case err := <-o.done:
		return err
	default:
		return errClosed
	}
}

// writeLoop is the single writer: it takes every queued operation, runs
// them in one transaction and commits once. If the batch fails, each
// operation is retried alone so one bad write cannot fail the others.
func (d *Driver) writeLoop() {
	defer close(d.done)
	batch := make([]*op, 0, d.opts.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case o := <-d.ops:
			batch = append(batch, o)
		case <-d.stop:
			d.drain()
			return
		}
		d.fill(&batch)
		d.commit(batch)
	}
}

// fill adds every queued operation to batch. A lone operation waits up to
// lingerFor for company: a claim and the previous claim's completions then
// share one fsync instead of paying for two.
func (d *Driver) fill(batch *[]*op) {
	deadline := time.Time{}
	for len(*batch) < cap(*batch) {
		select {
		case o := <-d.ops:
			*batch = append(*batch, o)
			continue
		default:
		}
		if len(*batch) > 1 || d.opts.Linger < 0 {
			return
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(d.opts.Linger)
		} else if time.Now().After(deadline) {
			return
		}
		runtime.Gosched()
	}
}

// drain fails operations still queued at Close.
func (d *Driver) drain() {
	for {
		select {
		case o := <-d.ops:
			o.done <- errClosed
		default:
			return
		}
	}
}

// commit runs a batch in one transaction. The transaction begins before
// the operations are taken, so a caller that gives up while the writer
// waits for the connection (a caller's DB() transaction holds it) or for
// another process's lock writes nothing.
func (d *Driver) commit(batch []*op) {
	tx, beginErr := d.wdb.BeginTx(context.Background(), nil)
	live := batch[:0:0]
	for _, o := range batch {
		if o.state.CompareAndSwap(opQueued, opTaken) {
			live = append(live, o)
		}
	}
	if beginErr != nil {
		for _, o := range live {
			o.done <- fmt.Errorf("sqlite: begin: %w", beginErr)
		}
		return
	}
	if len(live) == 0 {
		tx.Rollback() //nolint:errcheck // nothing was written
		return
	}
	err := d.run(tx, live)
	if err == nil || len(live) == 1 {
		for _, o := range live {
			o.done <- err
		}
		return
	}
	for _, o := range live {
		tx, err := d.wdb.BeginTx(context.Background(), nil)
		if err != nil {
			o.done <- fmt.Errorf("sqlite: begin: %w", err)
			continue
		}
		o.done <- d.run(tx, []*op{o})
	}
}

// run executes ops in tx and commits, or rolls back on the first error.
func (d *Driver) run(tx *sql.Tx, ops []*op) error {
	q := &cachedTx{tx: tx, d: d}
	for _, o := range ops {
		if err := o.fn(q); err != nil {
			tx.Rollback() //nolint:errcheck // the batch error is what matters
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

var _ driver.Driver = (*Driver)(nil)

// querier is what the driver's SQL runs on: a caller's *sql.Tx, or the
// writer's batch transaction with its statement cache.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// cachedTx runs queries of a writer batch through statements prepared once.
// It ignores the callers' contexts: a batch serves many callers, and one
// caller giving up must not abort the others' writes (write checks each
// caller's context before the batch starts). A context that cannot be
// cancelled also spares database/sql a watcher goroutine per query.
type cachedTx struct {
	tx *sql.Tx
	d  *Driver
}

// stmt returns the batch's handle on a statement prepared at Open, or nil
// for queries not on the hot path.
func (c *cachedTx) stmt(query string) *sql.Stmt {
	if s := c.d.stmts[query]; s != nil {
		return c.tx.StmtContext(context.Background(), s)
	}
	return nil
}

func (c *cachedTx) ExecContext(_ context.Context, query string, args ...any) (sql.Result, error) {
	if s := c.stmt(query); s != nil {
		return s.ExecContext(context.Background(), args...)
	}
	return c.tx.ExecContext(context.Background(), query, args...)
}

func (c *cachedTx) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := c.stmt(query); s != nil {
		return s.QueryContext(context.Background(), args...)
	}
	return c.tx.QueryContext(context.Background(), query, args...)
}

func (c *cachedTx) QueryRowContext(_ context.Context, query string, args ...any) *sql.Row {
	if s := c.stmt(query); s != nil {
		return s.QueryRowContext(context.Background(), args...)
	}
	return c.tx.QueryRowContext(context.Background(), query, args...)
}
