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
	// ClaimLimited claims like Claim within cluster-wide limits (see
	// LimitedClaimParams): in one transaction it locks the limits' rows,
	// counts their running tasks, refills and spends their rate tokens,
	// and claims no more than they allow.
	ClaimLimited(ctx context.Context, params LimitedClaimParams) (LimitedClaim, error)
	// Claimed reads back the tasks a claim may have marked running without
	// returning them, when its outcome is unknown (the connection broke
	// during it): those of params.Queue running under params.Owner with a
	// live lease, as Claim returns them. It changes nothing.
	Claimed(ctx context.Context, params ClaimedParams) ([]TaskRow, error)
	// Finish applies transitions and returns the ids it applied, and those
	// it finds already in the state the transition writes, at its fence
	// and by its owner (a finish retried after a commit whose outcome was
	// unknown; see sqlutil.AppliedBefore), without writing them again; the
	// others lost their lease. A success keeps LeaseOwner (the node that
	// ran it); every other transition clears it.
	Finish(ctx context.Context, params FinishParams) ([]int64, error)
	// FinishTx applies one transition inside the caller's transaction and
	// reports whether it applied.
	FinishTx(ctx context.Context, tx Tx, owner string, now time.Time, t Transition) (bool, error)
	// SaveStep stores one durable step's result with a running task (see
	// StepParams) in one fenced UPDATE, replacing a step of the same name,
	// and reports whether it applied: false when the task is not running
	// with params.Fence (and under params.Owner when set), writing
	// nothing. Params failing Validate are refused before any SQL.
	SaveStep(ctx context.Context, params StepParams) (bool, error)
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
	// Get loads one task or returns ErrNotFound. A task not in keel_tasks
	// is looked up in keel_archive, so an archived task is still found by
	// id, with TaskRow.ArchivedAt set.
	Get(ctx context.Context, id int64) (*TaskRow, error)
	// Cancel moves a pending or running task to cancelled (ErrWrongState
	// otherwise, also for an archived task) and returns it.
	Cancel(ctx context.Context, id int64, now time.Time) (*TaskRow, error)
	// Retry moves a dead or cancelled task back to pending, runnable now with
	// its attempts reset (ErrWrongState otherwise, also for an archived
	// task: archived tasks are never requeued), and returns it. Its stored
	// steps are kept: the work they did stays done.
	Retry(ctx context.Context, id int64, now time.Time) (*TaskRow, error)
	// GetByKey loads the task that holds the stored idempotency key key
	// (pending, running or succeeded: dead and cancelled tasks release
	// their key), through the key's unique index, or returns ErrNotFound.
	// keel_archive is not searched.
	GetByKey(ctx context.Context, key string) (*TaskRow, error)
	// List returns tasks matching params.
	List(ctx context.Context, params Filter) ([]TaskRow, error)
	// RecentFinished returns the newest params.Limit succeeded and dead
	// tasks (see RecentParams), newest first, read through an index on
	// finish time: a bounded read however large the table.
	RecentFinished(ctx context.Context, params RecentParams) ([]FinishedSample, error)
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
	// to pending, like Retry (keeping their steps), and returns how many it moved. A task whose
	// idempotency key is now held by another task is skipped.
	RetryMatching(ctx context.Context, params Filter, now time.Time) (int64, error)
	// PurgeMatching deletes up to Limit matching dead or cancelled tasks and
	// returns how many it deleted.
	PurgeMatching(ctx context.Context, params Filter) (int64, error)
	// Archive moves up to params.Limit finished tasks (see ArchiveParams)
	// from keel_tasks to keel_archive in one transaction, keeping their ids,
	// and returns how many it moved per state. It finds them through
	// indexes on finish time (never a scan of the task table), skips rows
	// another transaction holds, and keeps the live counters right: an
	// archived task leaves its state's counter and adds nothing to the
	// history (keel_minutes). An archived task no longer holds its
	// idempotency key. Call it until it moves fewer than Limit.
	Archive(ctx context.Context, params ArchiveParams) (ArchiveResult, error)
	// PurgeArchive deletes up to limit (1..MaxArchiveLimit) rows of
	// keel_archive archived before before, oldest first, and returns how
	// many it deleted.
	PurgeArchive(ctx context.Context, before time.Time, limit int) (int64, error)
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
	// PruneNodes deletes stale nodes and returns how many it deleted. In
	// the same cut it deletes the broker-source reports (SourceStore) of
	// nodes no longer registered that were not refreshed within OlderThan
	// either: a source whose process died.
	PruneNodes(ctx context.Context, params PruneNodesParams) (int64, error)
	// FireAlert opens an alert of params.Rule and params.Subject and
	// returns it with true, or, when one is open already, returns that one
	// unchanged with false. The database decides (a unique key on the open
	// alert), so two leaders never open the same alert twice.
	FireAlert(ctx context.Context, params FireAlertParams) (*AlertRow, bool, error)
	// UpdateAlert records the latest message and values of the open alert
	// params.ID (the leader's evaluation while it fires) and reports
	// whether it did; a resolved or unknown alert is left alone (false).
	UpdateAlert(ctx context.Context, params UpdateAlertParams) (bool, error)
	// ResolveAlert resolves the open alert params.ID and returns it with
	// true; an alert resolved already is returned unchanged with false;
	// an unknown id is ErrNotFound.
	ResolveAlert(ctx context.Context, params ResolveAlertParams) (*AlertRow, bool, error)
	// GetAlert loads one alert with its deliveries, or returns ErrNotFound.
	GetAlert(ctx context.Context, id int64) (*AlertRow, error)
	// ListAlerts returns the alerts matching filter, newest (highest id)
	// first, with their deliveries.
	ListAlerts(ctx context.Context, filter AlertFilter) ([]AlertRow, error)
	// RecordDelivery records one delivery attempt (see DeliveryParams); an
	// unknown alert id is ErrNotFound.
	RecordDelivery(ctx context.Context, params DeliveryParams) error
	// GetMeta returns the stored document name, or nil when there is none
	// (a stored empty document is empty, not nil).
	GetMeta(ctx context.Context, name string) ([]byte, error)
	// PutMeta stores value as the document name, replacing it; a nil value
	// deletes it.
	PutMeta(ctx context.Context, name string, value []byte, now time.Time) error
	// ScheduleStore stores periodic tasks' schedules and enqueues their
	// ticks.
	ScheduleStore
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

// PoolStats is a snapshot of a driver's connection pool in this process.
type PoolStats struct {
	// InUse is how many connections are lent out now.
	InUse int
	// Idle is how many open connections wait in the pool.
	Idle int
	// Max is the pool's limit on open connections.
	Max int
	// WaitCount is how many times a caller had to wait for a connection
	// since the pool opened.
	WaitCount int64
	// WaitDuration is the total time callers waited for a connection
	// since the pool opened.
	WaitDuration time.Duration
	// MaxSetting says where Max is set, for messages that tell an
	// operator to raise it, such as "the DSN parameter pool_max_conns".
	MaxSetting string
}

// PoolStater is implemented by drivers that report their connection pool
// (keel doctor, the keel_db_connections metrics). PoolStats must be cheap
// and do no I/O.
type PoolStater interface {
	PoolStats() PoolStats
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
	// LastVacuum is when the table was last vacuumed, by anyone (zero:
	// never); Vacuuming, that a vacuum of it runs now.
	LastVacuum time.Time
	Vacuuming  bool
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

// GroupCommitter is implemented by a driver whose concurrent writes share
// one commit (SQLite's single writer merges them into one transaction).
// The engine's outcome writer then writes side by side at once: that adds
// no commit. Other drivers commit each write on its own, and there
// outcomes that arrive during a write wait for it and go in the next one.
type GroupCommitter interface {
	GroupCommits() bool
}
