// Package driver defines the storage contract between keel's engine and a
// database, and the row types both sides share.
//
// A driver is a list of queries: one method per operation, a params struct
// per method, ctx first. Differences between databases stay inside the
// driver; the engine never switches on a dialect. Every driver must pass the
// conformance suite in driver/drivertest against a real database.
package driver

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Errors a driver returns; the engine and users test them with errors.Is.
var (
	// ErrNotFound: no task with that id.
	ErrNotFound = errors.New("keel: task not found")
	// ErrIdempotencyConflict: the idempotency key is held by a task with a
	// different payload or type.
	ErrIdempotencyConflict = errors.New("keel: idempotency key already used with a different payload or type")
	// ErrWrongState: the operation does not apply to the task's current state.
	ErrWrongState = errors.New("keel: task is not in a state that allows this")
	// ErrUnavailable: the database could not be reached (connection
	// refused, reset or lost). Retry later; a retried enqueue should carry
	// the same idempotency key, since a connection lost during the commit
	// leaves its outcome unknown.
	ErrUnavailable = errors.New("keel: database unavailable")
)

// Tx is a caller's transaction, handed to InsertTx and FinishTx: a *sql.Tx
// for drivers built on database/sql, or a driver's native transaction type
// (pgx.Tx for driver/postgres, which takes *sql.Tx too). A driver rejects
// other types with ErrUnsupportedTx.
type Tx = any

// ErrUnsupportedTx: the transaction's type is not one the driver can use.
var ErrUnsupportedTx = errors.New("keel: unsupported transaction type for this driver")

// Driver is the storage contract. Implementations must be safe for
// concurrent use.
type Driver interface {
	// Migrate creates or upgrades the schema; it is safe to call often.
	Migrate(ctx context.Context) error
	// Insert inserts tasks in one transaction; a held idempotency key yields
	// the existing task with Duplicate set.
	Insert(ctx context.Context, params []InsertParams) ([]InsertResult, error)
	// InsertTx is Insert inside the caller's transaction.
	InsertTx(ctx context.Context, tx Tx, params []InsertParams) ([]InsertResult, error)
	// Claim marks up to Limit ready tasks running and returns them.
	Claim(ctx context.Context, params ClaimParams) ([]TaskRow, error)
	// Finish applies transitions and returns the ids it applied; the others
	// lost their lease. A success keeps LeaseOwner (the node that ran it);
	// every other transition clears it.
	Finish(ctx context.Context, params FinishParams) ([]int64, error)
	// FinishTx applies one transition inside the caller's transaction and
	// reports whether it applied.
	FinishTx(ctx context.Context, tx Tx, owner string, now time.Time, t Transition) (bool, error)
	// Heartbeat extends leases and returns the ids still held.
	Heartbeat(ctx context.Context, params HeartbeatParams) ([]int64, error)
	// ListExpired returns running tasks whose lease expired, with the
	// instant it judged them by: ID, Queue, Type, Priority, State, Attempt,
	// MaxAttempts, Fence, RunAt, LeaseOwner, LeaseExpiresAt and
	// AttemptedAt. It changes nothing: the caller decides each task's fate
	// and writes it with Rescue.
	ListExpired(ctx context.Context, params ExpiredParams) ([]TaskRow, time.Time, error)
	// Rescue applies the rescuer's transitions to tasks whose lease is
	// still expired and returns those it applied, as updated.
	Rescue(ctx context.Context, params RescueParams) ([]TaskRow, error)
	// Get loads one task or returns ErrNotFound.
	Get(ctx context.Context, id int64) (*TaskRow, error)
	// Cancel moves a pending or running task to cancelled (ErrWrongState
	// otherwise) and returns it.
	Cancel(ctx context.Context, id int64, now time.Time) (*TaskRow, error)
	// Retry moves a dead or cancelled task back to pending, runnable now with
	// its attempts reset (ErrWrongState otherwise), and returns it.
	Retry(ctx context.Context, id int64, now time.Time) (*TaskRow, error)
	// List returns tasks matching params.
	List(ctx context.Context, params Filter) ([]TaskRow, error)
	// Counts returns the live counters (see CountRow), summed over the
	// rows a driver keeps per connection, without zero rows, ordered by
	// queue, type, kind, priority and due. It never reads keel_tasks.
	Counts(ctx context.Context) ([]CountRow, error)
	// Minutes returns the history rows (see MinuteRow) of the minutes from
	// since (rounded down to its minute) on, ordered by minute, queue and
	// type.
	Minutes(ctx context.Context, since time.Time) ([]MinuteRow, error)
	// Reconcile compares the live counters with keel_tasks as of one
	// snapshot and corrects every difference (returned as the corrections
	// applied: N is what was added), folds each counter's per-connection
	// rows into one and drops zero rows, folds the history rows of minutes
	// before params.Now's the same way, and deletes history rows of
	// minutes before params.MinutesBefore. It reads the whole task table:
	// the leader runs it now and then, nothing else should.
	Reconcile(ctx context.Context, params ReconcileParams) ([]CountRow, error)
	// CountAhead counts ready tasks of one priority ahead of a position in
	// line (see AheadParams), reading at most Limit of them.
	CountAhead(ctx context.Context, params AheadParams) (int64, error)
	// RetryMatching moves up to Limit matching dead or cancelled tasks back
	// to pending, like Retry, and returns how many it moved. A task whose
	// idempotency key is now held by another task is skipped.
	RetryMatching(ctx context.Context, params Filter, now time.Time) (int64, error)
	// PurgeMatching deletes up to Limit matching dead or cancelled tasks and
	// returns how many it deleted.
	PurgeMatching(ctx context.Context, params Filter) (int64, error)
	// PatchSetting applies a settings change atomically (concurrent patches
	// of different fields all survive) and returns the stored row.
	PatchSetting(ctx context.Context, patch SettingPatch) (*Setting, error)
	// ListSettings returns every stored setting ordered by kind and name.
	ListSettings(ctx context.Context) ([]Setting, error)
	// DeclareTypes stores task types' declared defaults in one transaction,
	// each row replacing the type's stored one (rows written in name order,
	// so concurrent declarations do not deadlock).
	DeclareTypes(ctx context.Context, params DeclareTypesParams) error
	// ListTypes returns the stored defaults of the named task types, or of
	// every type when names is nil, ordered by name. A name with no row is
	// left out.
	ListTypes(ctx context.Context, names []string) ([]TypeDefaults, error)
	// Lead takes or renews a leadership lease and reports whether Owner holds it.
	Lead(ctx context.Context, params LeadParams) (bool, error)
	// Resign gives up a leadership lease held by owner.
	Resign(ctx context.Context, name, owner string) error
	// RegisterNode inserts or refreshes a worker process's row in the node
	// registry.
	RegisterNode(ctx context.Context, params NodeParams) error
	// ListNodes returns the registered nodes ordered by name.
	ListNodes(ctx context.Context) ([]NodeRow, error)
	// RemoveNode deletes a node's row (a graceful stop); no row is no error.
	RemoveNode(ctx context.Context, name string) error
	// PruneNodes deletes stale nodes and returns how many it deleted.
	PruneNodes(ctx context.Context, params PruneNodesParams) (int64, error)
	// Close releases the driver's connections.
	Close() error
}

// Migration is one schema version of a driver and whether the call that
// reported it applied it.
type Migration struct {
	Version   int
	Name      string
	Applied   bool      // applied by this call
	AppliedAt time.Time // when it was applied
}

// Migrator is implemented by drivers that apply their migrations on demand
// and report every schema version (keel migrate).
type Migrator interface {
	Migrations(ctx context.Context) ([]Migration, error)
}

// DBer is implemented by drivers built on database/sql; DB returns the
// handle a caller should begin transactions on for EnqueueTx and CompleteTx.
type DBer interface {
	DB() *sql.DB
}

// MaintainReport says what a Maintainer found in the task table and
// what it did about it.
type MaintainReport struct {
	// LiveRows and DeadRows are the task table's rows and its dead row
	// versions, as the database's statistics count them.
	LiveRows, DeadRows int64
	// Threshold is the number of dead rows from which the table needs a
	// vacuum.
	Threshold int64
	// Autovacuum: the database vacuums the task table by itself.
	Autovacuum bool
	// Vacuumed: Maintain vacuumed the table, which took Took.
	Vacuumed bool
	Took     time.Duration
	// Reason says in a few words why it vacuumed or did not.
	Reason string
}

// Maintainer is implemented by drivers whose database needs upkeep that it
// may not do by itself: on PostgreSQL, a VACUUM of the task table when
// autovacuum is off for it (or falls behind), or the dead row versions
// every claimed task leaves in the claim index slow every later claim.
// The engine's leader calls Maintain every Config.MaintainInterval; it
// reads a few statistics and does nothing more when nothing is needed.
type Maintainer interface {
	Maintain(ctx context.Context) (MaintainReport, error)
}

// ListenParams configures Notifier.Listen.
type ListenParams struct {
	// Wake is called with the queue a task became ready in, as soon as
	// another process (or this one) commits it. An empty queue means "any
	// queue": the listener (re)connected and may have missed notifications.
	// Wake must return quickly. Required.
	Wake func(queue string)
	// Error, when set, is called with each failure of the listening
	// connection before the listener reconnects. Default nil.
	Error func(err error)
}

// Notifier is implemented by drivers that can tell workers in every process
// at once that tasks became ready (PostgreSQL's LISTEN/NOTIFY), so that the
// poll is only a fallback. The engine discovers it with a type assertion.
//
// Every write that leaves a task pending and ready at once (RunAt not after
// UpdatedAt) wakes each running Listen once for its queue, in this process
// too: Insert, Retry, RetryMatching and Rescue after they commit, InsertTx
// when the caller's transaction commits. Callers do not wake their own
// workers for those tasks again.
type Notifier interface {
	// Listen calls params.Wake for every notification until ctx ends, then
	// returns nil. It reconnects by itself, with a short backoff, whenever
	// its connection fails, and calls Wake("") after each (re)connect.
	Listen(ctx context.Context, params ListenParams) error
}
