package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
)

// The single writer: every write of the process goes through one
// connection and is committed in groups (group commit).

// op is one write waiting for the next group commit. fn runs inside the
// batch transaction and reports only database errors; its own outcome is
// kept in its closure.
type op struct {
	fn   func(tx querier) error
	done chan error
	// ins are the tasks of an Insert, and res its results: a batch runs
	// the inserts of all its Inserts together (insertTogether); fn runs
	// one alone.
	ins []driver.InsertParams
	res *[]driver.InsertResult
	// state moves from queued to taken (by the writer) or abandoned (by a
	// caller whose context ended first): exactly one side wins.
	state atomic.Int32
	// queued is when the operation was queued, for waited.
	queued time.Time
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
	return d.submit(ctx, &op{fn: fn})
}

// submit queues o for the next group commit and waits as write does.
func (d *Driver) submit(ctx context.Context, o *op) error {
	o.done = make(chan error, 1)
	o.queued = time.Now()
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
		if len(d.variedWanted) > 0 {
			d.prepareVaried()
		}
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
// another process's lock writes nothing. Beginning it takes the writer's
// turn at the file's write lock (the gate, gate_conn.go).
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
	ops, err := insertTogether(q, ops)
	if err != nil {
		tx.Rollback() //nolint:errcheck // the batch error is what matters
		return err
	}
	for _, o := range ops {
		q.queued = o.queued
		if err := o.fn(q); err != nil {
			tx.Rollback() //nolint:errcheck // the batch error is what matters
			return err
		}
	}
	// The live counters of every operation, in one upsert per table.
	if err := writeCounts(context.Background(), q, &q.tally); err != nil {
		tx.Rollback() //nolint:errcheck // the batch error is what matters
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// insertTogether inserts the tasks of the batch's Inserts, when there are
// two or more, with one call of insert (so in statements of many rows: a
// statement of one row cost as much as many rows' work) and returns the
// other operations. Concurrent Inserts have no order between them, so one
// order is as good as another.
func insertTogether(q querier, ops []*op) ([]*op, error) {
	var inserts, rest []*op
	n := 0
	for _, o := range ops {
		if o.ins != nil {
			inserts = append(inserts, o)
			n += len(o.ins)
		} else {
			rest = append(rest, o)
		}
	}
	if len(inserts) < 2 {
		return ops, nil
	}
	all := make([]driver.InsertParams, 0, n)
	for _, o := range inserts {
		all = append(all, o.ins...)
	}
	out, err := insert(context.Background(), q, all)
	if err != nil {
		return nil, err
	}
	for _, o := range inserts {
		*o.res, out = out[:len(o.ins):len(o.ins)], out[len(o.ins):]
	}
	return rest, nil
}

// querier is what the driver's SQL runs on: a caller's *sql.Tx, or the
// writer's batch transaction with its statement cache.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// callerTx accepts the caller transactions this driver can use: *sql.Tx.
func callerTx(tx driver.Tx) (*sql.Tx, error) {
	t, ok := tx.(*sql.Tx)
	if !ok || t == nil {
		return nil, fmt.Errorf("sqlite: got %T, want a *sql.Tx begun on the driver's DB(): %w", tx, driver.ErrUnsupportedTx)
	}
	return t, nil
}

// cachedTx runs queries of a writer batch through statements prepared once.
// It ignores the callers' contexts: a batch serves many callers, and one
// caller giving up must not abort the others' writes (write checks each
// caller's context before the batch starts). A context that cannot be
// cancelled also spares database/sql a watcher goroutine per query.
type cachedTx struct {
	tx *sql.Tx
	d  *Driver
	// tally gathers the live counter changes of the batch's operations
	// (count), written once before the commit.
	tally sqlutil.Tally
	// queued is when the operation running now was queued (waited).
	queued time.Time
}

// waited is how long the writer's operation running in tx waited for its
// turn: the queue, the gate and the other process's hold on the file's
// write lock. A claim, a renewal or a leader's term moves its lease by it, so the lease
// counts from when its statement runs, as PostgreSQL's and MariaDB's
// leases count from the database's now: on a busy file, a lease stamped
// when it was asked for could have run out before it was written, and the
// rescuer would take a live worker's task. Zero outside the writer and
// with Options.CallerClock.
func waited(tx querier) time.Duration {
	if q, ok := tx.(*cachedTx); ok && !q.queued.IsZero() && !q.d.opts.CallerClock {
		return time.Since(q.queued)
	}
	return 0
}

// stmt returns the batch's handle on a statement prepared at Open or,
// for the live counters' upserts and the multi-row inserts (their text
// varies with the number of rows, so they cannot be prepared at Open),
// prepared at first use and kept; nil for other queries.
func (c *cachedTx) stmt(query string) *sql.Stmt {
	s := c.d.stmts[query]
	if s == nil && isVaried(query) {
		s = c.d.variedStmt(query)
	}
	if s != nil {
		return c.tx.StmtContext(context.Background(), s)
	}
	return nil
}

// maxVariedStmts bounds the varied statements kept prepared: a counter
// upsert per row count seen (a batch rarely touches more than a few
// counter rows) and at most nine inserts (insertSQL).
const maxVariedStmts = 64

// The counter upserts' text before their rows.
var (
	countUpsertHead, _, _  = strings.Cut(sqlCountUpsert, "{rows}")
	minuteUpsertHead, _, _ = strings.Cut(sqlMinuteUpsert, "{rows}")
)

// isVaried reports whether query is a live counters' upsert or a
// multi-row insert, prepared at first use.
func isVaried(query string) bool {
	return strings.HasPrefix(query, countUpsertHead) || strings.HasPrefix(query, minuteUpsertHead) ||
		strings.HasPrefix(query, sqlInsertHead)
}

// variedStmt returns query's statement if the writer prepared it; else
// it notes query for prepareVaried and returns nil (the caller runs the
// text this time). The writer's one connection is busy with the batch, so
// the statement cannot be prepared now. Only the writer calls it.
func (d *Driver) variedStmt(query string) *sql.Stmt {
	if s := d.variedStmts[query]; s != nil {
		return s
	}
	if len(d.variedStmts)+len(d.variedWanted) < maxVariedStmts {
		d.variedWanted = append(d.variedWanted, query)
	}
	return nil
}

// prepareVaried prepares the statements variedStmt noted, between
// batches, when the writer connection is free.
func (d *Driver) prepareVaried() {
	for _, q := range d.variedWanted {
		if d.variedStmts[q] != nil {
			continue
		}
		s, err := d.wdb.PrepareContext(context.Background(), q)
		if err != nil {
			continue // run as text again
		}
		if d.variedStmts == nil {
			d.variedStmts = map[string]*sql.Stmt{}
		}
		d.variedStmts[q] = s
	}
	d.variedWanted = d.variedWanted[:0]
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
