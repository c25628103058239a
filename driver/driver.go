// Package driver defines the storage contract between keel's engine and a
// database, and the row types both sides share.
//
// A driver is a list of queries: one method per operation, a params struct
// per method, ctx first. Differences between databases stay inside the
// driver; the engine never switches on a dialect. Every driver must pass the
// conformance suite in driver/drivertest against a real database.
package driver

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// State is the lifecycle state of a task row.
type State string

// The task states. pending covers ready, scheduled (run_at in the future) and
// retrying (attempt > 0) tasks.
const (
	StatePending   State = "pending"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateDead      State = "dead"
	StateCancelled State = "cancelled"
)

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateRunning, StateSucceeded, StateDead, StateCancelled:
		return true
	}
	return false
}

// HoldsKey reports whether a task in state s holds its idempotency key:
// pending, running and succeeded tasks do; dead and cancelled ones release it.
func (s State) HoldsKey() bool {
	return s == StatePending || s == StateRunning || s == StateSucceeded
}

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

// Outcome names how an attempt ended; it is recorded in the error history.
type Outcome string

// Attempt outcomes other than success.
const (
	OutcomeError        Outcome = "error"
	OutcomePanic        Outcome = "panic"
	OutcomeTimeout      Outcome = "timeout"
	OutcomePermanent    Outcome = "permanent"
	OutcomeLeaseExpired Outcome = "lease_expired"
	// OutcomeSnoozed: the handler snoozed once more than the task's
	// maximum number of snoozes allows, so the task was dead-lettered.
	OutcomeSnoozed Outcome = "snoozed"
)

// AttemptError is one entry of a task's error history: one failed attempt.
type AttemptError struct {
	Attempt int       `json:"attempt"`
	Node    string    `json:"node,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Outcome Outcome   `json:"outcome"`
	Error   string    `json:"error"`
	Stack   string    `json:"stack,omitempty"`
}

// MaxErrorHistory is how many attempt errors a task keeps (the most recent).
const MaxErrorHistory = 20

// TaskRow is one row of keel_tasks.
type TaskRow struct {
	ID          int64
	Queue       string
	Type        string
	Priority    int
	Payload     []byte // JSON
	State       State
	Attempt     int
	MaxAttempts int
	// Snoozes counts the snoozes since the task was enqueued or last
	// requeued by Retry or RetryMatching.
	Snoozes int
	// Fence counts the task's claims and is never reset, not even by Retry
	// or a refunded attempt: the fencing token of the current claim.
	Fence          int64
	RunAt          time.Time
	Timeout        time.Duration
	IdemKey        string
	PayloadDigest  string
	LeaseOwner     string    // running: the lease holder; succeeded: the node that ran it; else empty
	LeaseExpiresAt time.Time // zero unless running
	CreatedAt      time.Time
	StartedAt      time.Time // first start; zero until then
	AttemptedAt    time.Time // start of the current or last attempt
	FinishedAt     time.Time // zero until succeeded, dead or cancelled
	UpdatedAt      time.Time
	Errors         []AttemptError
	Result         []byte // JSON or nil
	Meta           []byte // JSON or nil
}

// InsertParams describes one task to insert. All fields are validated by the
// engine before a driver sees them.
type InsertParams struct {
	Queue         string
	Type          string
	Priority      int
	Payload       []byte // canonical JSON
	MaxAttempts   int
	RunAt         time.Time
	Timeout       time.Duration
	IdemKey       string // empty: no key
	PayloadDigest string // SHA-256 over type and canonical payload
	Meta          []byte
	Now           time.Time
}

// InsertResult is the task an insert produced, or the existing task that
// holds the same idempotency key (Duplicate). A key held by a task with a
// different PayloadDigest fails the whole insert with
// ErrIdempotencyConflict, writing nothing.
type InsertResult struct {
	Task      *TaskRow
	Duplicate bool
}

// ClaimParams asks for up to Limit ready tasks of Queue, best first
// (priority DESC, run_at ASC, id ASC), marking them running under Owner.
// Claim returns the fields a worker runs a task from: ID, Queue, Type,
// Priority, Payload, State, Attempt, MaxAttempts, Snoozes, Fence, RunAt,
// Timeout, LeaseOwner, LeaseExpiresAt, AttemptedAt and CreatedAt; Get has
// the rest.
type ClaimParams struct {
	Queue string
	Limit int
	// Types, when not nil, are the only task types to claim: those the
	// worker has handlers for, so that it never takes a task it cannot run.
	// An empty, non-nil list claims nothing. Default nil: any type.
	Types []string
	// ExcludeTypes are task types not to claim (paused types). Default none.
	ExcludeTypes   []string
	Owner          string
	Now            time.Time
	LeaseExpiresAt time.Time
}

// SortClaimed puts claimed rows in the order a claim must return them:
// priority DESC, run_at ASC, id ASC (UPDATE … RETURNING has no order).
func SortClaimed(rows []TaskRow) {
	slices.SortFunc(rows, func(a, b TaskRow) int {
		if a.Priority != b.Priority {
			return cmp.Compare(b.Priority, a.Priority)
		}
		if c := a.RunAt.Compare(b.RunAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// Transition moves one running task out of running. It applies only while
// the task is still running under the owner with the same fencing token
// (TaskRow.Fence of the claim), so a stale worker's write is rejected.
type Transition struct {
	ID     int64
	Fence  int64
	State  State         // succeeded, pending (retry, snooze, release) or dead
	RunAt  time.Time     // next run for pending
	Result []byte        // stored for succeeded
	Error  *AttemptError // appended to the history when set
	// Refund gives the attempt back (snooze, release on shutdown).
	Refund bool
	// Snooze counts the transition as one more snooze (TaskRow.Snoozes).
	Snooze bool
}

// FinishParams finishes many running tasks held by Owner in one batch.
type FinishParams struct {
	Owner       string
	Now         time.Time
	Transitions []Transition
}

// HeartbeatParams extends the leases Owner holds on IDs.
type HeartbeatParams struct {
	Owner          string
	IDs            []int64
	Now            time.Time
	LeaseExpiresAt time.Time
}

// ExpiredParams asks for up to Limit running tasks whose lease expired
// before Now (the database's clock for a driver that uses it), the oldest
// expiry first.
type ExpiredParams struct {
	Now   time.Time
	Limit int
}

// RescueParams writes the rescuer's decisions for tasks ListExpired
// returned. Each transition applies only while its task is still running
// under Owner with the same Fence and its lease is still expired, so a
// heartbeat, a completion or a cancel that got in first wins. Transitions
// are written as of Now, the instant ListExpired judged by.
type RescueParams struct {
	Now   time.Time
	Tasks []RescueTask
}

// RescueTask is one expired task's transition and the lease holder that
// lost it.
type RescueTask struct {
	Owner      string
	Transition Transition
}

// Filter selects tasks: for List, and for the bulk operations
// RetryMatching and PurgeMatching. Zero fields do not filter.
// CreatedAfter (inclusive) and CreatedBefore (exclusive) bound created_at;
// FinishedAfter (inclusive) and FinishedBefore (exclusive) bound
// finished_at, and a task not finished (finished_at NULL) never matches a
// finished bound.
//
// List orders by id descending, starting below BeforeID when it is set.
// A bulk operation (see ValidateBulk) takes only dead or cancelled tasks,
// bounded by type, queue and finish time, at most Limit (1..10000) per
// call, lowest ids first, so callers page through large sets and can show
// progress. RetryMatching skips tasks whose idempotency key another task
// holds without counting them against Limit, and of matching tasks that
// share a free key it requeues only the lowest id (the others then find it
// held), so calling it until it returns 0 requeues everything that can be
// requeued.
type Filter struct {
	State          State
	Type           string
	Queue          string
	CreatedAfter   time.Time
	CreatedBefore  time.Time
	FinishedAfter  time.Time
	FinishedBefore time.Time
	BeforeID       int64
	Limit          int
}

// QueueCount is the number of tasks of one queue and type in one state.
type QueueCount struct {
	Queue string
	Type  string
	State State
	Count int64
}

// ValidateBulk rejects a filter a bulk operation cannot take: it touches
// only dead or cancelled tasks, at most 10000 at a time, and selects them
// by type, queue and finish time only. Drivers call it before running any
// SQL.
func (f Filter) ValidateBulk() error {
	switch {
	case f.State != StateDead && f.State != StateCancelled:
		return fmt.Errorf("state must be dead or cancelled, got %q", f.State)
	case f.Limit < 1 || f.Limit > 10000:
		return fmt.Errorf("limit must be in 1..10000, got %d", f.Limit)
	case !f.CreatedAfter.IsZero() || !f.CreatedBefore.IsZero():
		return errors.New("created_after and created_before do not apply to bulk operations")
	case f.BeforeID != 0:
		return errors.New("before_id does not apply to bulk operations")
	}
	return nil
}

// AheadParams locates a pending task in its queue's line: Ahead counts the
// ready tasks (run_at <= Now) of Queue that a claim takes before a task with
// Priority, RunAt and ID (priority DESC, run_at ASC, id ASC).
type AheadParams struct {
	Queue    string
	Priority int
	RunAt    time.Time
	ID       int64
	Now      time.Time
}

// SettingKind says what a runtime setting applies to.
type SettingKind string

// The kinds of runtime settings.
const (
	SettingQueue SettingKind = "queue"
	SettingType  SettingKind = "type"
)

// Setting is one row of keel_settings: runtime settings of one queue or one
// task type, changed without a restart and applied by every node within its
// settings refresh interval. Zero numeric fields mean "not set here" (the
// process configuration or the task's own value applies).
type Setting struct {
	Kind   SettingKind
	Name   string
	Paused bool // queue: no claims; type: its tasks are not claimed
	// Concurrency caps how many of a queue's (or a type's) tasks run at
	// once on each node.
	Concurrency int
	Timeout     time.Duration // type: overrides the attempt timeout
	MaxAttempts int           // type: overrides the task's max attempts
	BackoffBase time.Duration // type: first retry delay
	BackoffMax  time.Duration // type: retry delay cap
	UpdatedAt   time.Time
}

// SettingPatch changes some fields of one setting, creating its row when it
// does not exist. Nil fields keep their stored value (or the zero value on
// a new row); a pointer to zero clears a numeric override. Durations are
// stored in whole milliseconds: they are truncated, except that a positive
// duration below 1ms is stored as 1ms so that it stays set. Now is the
// time recorded in UpdatedAt (drivers that use the database clock ignore
// it, as for other writes).
type SettingPatch struct {
	Kind        SettingKind
	Name        string
	Paused      *bool
	Concurrency *int
	Timeout     *time.Duration
	MaxAttempts *int
	BackoffBase *time.Duration
	BackoffMax  *time.Duration
	Now         time.Time
}

// TypeDefaults is one row of keel_types: the defaults a task type was
// declared with (keel.Handle or keel.Declare options), stored so that every
// client enqueuing the type applies them, including clients that did not
// register it. Zero fields (nil Priority) are not set: the enqueuing
// client's configuration applies.
type TypeDefaults struct {
	Name        string
	Queue       string
	Priority    *int
	MaxAttempts int
	Timeout     time.Duration // stored in milliseconds, like settings
	BackoffBase time.Duration
	BackoffMax  time.Duration
	UpdatedAt   time.Time
}

// Equal reports whether t and o declare the same defaults (UpdatedAt
// aside), durations compared as stored (SettingMillis).
func (t TypeDefaults) Equal(o TypeDefaults) bool {
	ms := func(d time.Duration) int64 { return *SettingMillis(&d) }
	samePriority := (t.Priority == nil) == (o.Priority == nil) && (t.Priority == nil || *t.Priority == *o.Priority)
	return t.Name == o.Name && t.Queue == o.Queue && samePriority && t.MaxAttempts == o.MaxAttempts &&
		ms(t.Timeout) == ms(o.Timeout) && ms(t.BackoffBase) == ms(o.BackoffBase) && ms(t.BackoffMax) == ms(o.BackoffMax)
}

// DeclareTypesParams stores the defaults of several task types: each row
// replaces the type's stored row whole (the last writer wins). Now is the
// time recorded in UpdatedAt (drivers that use the database clock ignore
// it).
type DeclareTypesParams struct {
	Types []TypeDefaults
	Now   time.Time
}

// Validate rejects what no driver stores: an empty or duplicate name, or
// a negative number.
func (p DeclareTypesParams) Validate() error {
	seen := make(map[string]bool, len(p.Types))
	for _, t := range p.Types {
		switch {
		case t.Name == "":
			return errors.New("declare types: empty name")
		case seen[t.Name]:
			return fmt.Errorf("declare types: %q given twice", t.Name)
		case t.MaxAttempts < 0 || t.Timeout < 0 || t.BackoffBase < 0 || t.BackoffMax < 0:
			return fmt.Errorf("declare types: %q: negative value", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// LeadParams tries to take or keep the leadership Name for TTL.
type LeadParams struct {
	Name  string
	Owner string
	Now   time.Time
	TTL   time.Duration
}

// NodeParams records one worker process in the node registry, or
// refreshes its row: Now is its latest heartbeat.
type NodeParams struct {
	Name      string
	Host      string
	PID       int
	Queues    []string
	StartedAt time.Time
	Now       time.Time
}

// NodeRow is one row of keel_nodes: a worker process and its last heartbeat.
type NodeRow struct {
	Name        string
	Host        string
	PID         int
	Queues      []string
	StartedAt   time.Time
	HeartbeatAt time.Time
}

// PruneNodesParams removes nodes whose last heartbeat is more than
// OlderThan before Now.
type PruneNodesParams struct {
	Now       time.Time
	OlderThan time.Duration
}

// Tx is a caller's transaction, handed to InsertTx and FinishTx: a *sql.Tx
// for drivers built on database/sql, or a driver's native transaction type
// (pgx.Tx for driver/postgres, which takes *sql.Tx too). A driver rejects
// other types with ErrUnsupportedTx.
type Tx = any

// ErrUnsupportedTx: the transaction's type is not one the driver can use.
var ErrUnsupportedTx = errors.New("keel: unsupported transaction type for this driver")

// Validate rejects a patch no driver can store: an unknown kind or an
// empty name.
func (p SettingPatch) Validate() error {
	if p.Kind != SettingQueue && p.Kind != SettingType {
		return fmt.Errorf("kind must be queue or type, got %q", p.Kind)
	}
	if p.Name == "" {
		return errors.New("empty name")
	}
	return nil
}

// SettingMillis is how drivers store a setting's duration: whole
// milliseconds, nil when d is nil. A positive duration below 1ms is kept as
// 1ms, so that it stays set.
func SettingMillis(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	ms := d.Milliseconds()
	if ms == 0 && *d > 0 {
		ms = 1
	}
	return &ms
}

// SettingDuration reads back a duration stored by SettingMillis.
func SettingDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

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
	// Counts returns task counts by queue, type and state.
	Counts(ctx context.Context) ([]QueueCount, error)
	// CountFinished returns, by queue and state, how many tasks reached
	// succeeded or dead at or after since (finished_at): the recent
	// throughput and dead-letter rate. Type is empty in its rows.
	CountFinished(ctx context.Context, since time.Time) ([]QueueCount, error)
	// CountAhead counts the ready tasks a claim takes before the given
	// position (see AheadParams).
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
