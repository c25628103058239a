package sqlutil

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
)

// Ops are the driver.Driver methods whose logic the SQL drivers share: a
// driver embeds them (NewOps, with its OpsConfig) and defines for itself
// each method its database does differently. Its fields stay unexported,
// so that nothing of the wiring shows on a driver's exported API.
type Ops[Q any] struct{ c OpsConfig[Q] }

// txNow is now on the clock the driver writes with (OpsConfig.Now).
func (o *Ops[Q]) txNow(ctx context.Context, q Q, now time.Time) (time.Time, error) {
	if o.c.Now == nil {
		return now, nil
	}
	return o.c.Now(ctx, q, now)
}

// NewOps returns the shared methods run with c.
func NewOps[Q any](c OpsConfig[Q]) Ops[Q] { return Ops[Q]{c: c} }

// OpsConfig is what a driver hands Ops: its handles, its statements and
// its parts of the hot path.
type OpsConfig[Q any] struct {
	DB  DB[Q]
	SQL Statements[Q]
	// InsertIn inserts tasks in the transaction q; after (nil: nothing) is
	// run once that transaction committed.
	InsertIn func(ctx context.Context, q Q, params []driver.InsertParams) (out []driver.InsertResult, after func(), err error)
	// CallerTx is the driver's handle on a caller's transaction, and
	// InsertCaller inserts tasks in one.
	CallerTx     func(tx driver.Tx) (Q, error)
	InsertCaller func(ctx context.Context, q Q, params []driver.InsertParams) ([]driver.InsertResult, error)
	// ClaimOn runs Claim's ClaimIn: in SQLite's writer, a MySQL
	// transaction, on PostgreSQL's pool (one statement).
	ClaimOn Run[Q]
	// ClaimIn claims up to p.Limit tasks in the transaction q for p with
	// its type filter (see ClaimTypes), keeping the live counters right.
	ClaimIn func(ctx context.Context, q Q, p driver.ClaimParams, include, exclude []string) ([]driver.TaskRow, error)
	// Now is the time of a write in the transaction q that takes its time
	// from Go (a held task's release), given the caller's now: the
	// database's clock where the driver reads it; nil: now.
	Now func(ctx context.Context, q Q, now time.Time) (time.Time, error)
	// Count writes t's changes to the live counters in the transaction q,
	// for a driver that counts in Go (nil: its triggers count).
	Count func(ctx context.Context, q Q, t *Tally) error
	// Notify tells other processes' workers, on commit of the transaction
	// q, that queues have ready tasks (nil: they poll).
	Notify func(ctx context.Context, q Q, queues []string) error
	// ApplyMigrations applies the driver's pending migrations and reports every
	// known version.
	ApplyMigrations func(ctx context.Context) ([]driver.Migration, error)
}

// Statements are a driver's SQL for Ops, by concern.
type Statements[Q any] struct {
	Alerts    AlertSQL[Q]
	Brakes    BrakeSQL
	Schedules ScheduleSQL
	Backlog   BacklogSQL
	Nodes     NodeSQL
	Limits    LimitSQL[Q]
	Archive   ArchiveSQL[Q]
	Sources   SourceSQL[Q]
	Requests  RequestSQL
	Tasks     TaskSQL
	Admin     AdminSQL
	Counters  CounterSQL
	Batches   BatchSQL
	Sequences SequenceSQL
	Workflows WorkflowSQL[Q]
}

// InsertTx implements driver.Driver: the inserts run under a savepoint of
// the caller's transaction, so a failure leaves nothing of the batch in
// it. A deadlock there may have rolled back the caller's whole
// transaction, so it is returned, not retried.
func (o *Ops[Q]) InsertTx(ctx context.Context, dtx driver.Tx, params []driver.InsertParams) ([]driver.InsertResult, error) {
	if Sequenced(params) {
		return o.insertWith(ctx, dtx, params, o.insertSequenced)
	}
	q, err := o.c.CallerTx(dtx)
	if err != nil {
		return nil, err
	}
	return InsertSavepointed(ctx, o.c.DB.Conn(q), func() ([]driver.InsertResult, error) { return o.c.InsertCaller(ctx, q, params) })
}

// Claim implements driver.Driver: ClaimIn, run by ClaimOn, for p's type
// filter; the claimed tasks come back sorted (see ClaimSorted).
func (o *Ops[Q]) Claim(ctx context.Context, p driver.ClaimParams) ([]driver.TaskRow, error) {
	return ClaimSorted(p, func(include, exclude []string) ([]driver.TaskRow, error) {
		var out []driver.TaskRow
		err := o.c.ClaimOn(ctx, func(q Q) error {
			var err error
			out, err = o.c.ClaimIn(ctx, q, p, include, exclude)
			return err
		})
		return out, err
	})
}
