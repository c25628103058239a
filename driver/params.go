package driver

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Parameter types of the Driver methods.

// InsertParams describes one task to insert. All fields are validated by the
// engine before a driver sees them.
type InsertParams struct {
	Queue       string
	Type        string
	Priority    int
	Payload     []byte // canonical JSON
	MaxAttempts int
	RunAt       time.Time
	Timeout     time.Duration
	IdemKey     string // empty: no key
	// DependsOn are the ids of the tasks this one waits for (empty: none).
	// Only Workflows.InsertHeld and CreateWorkflow read them (Insert and
	// InsertTx do not: keel sends a task with dependencies to InsertHeld;
	// a batch refuses it).
	DependsOn     []int64
	PayloadDigest string // SHA-256 over type and canonical payload
	Meta          []byte
	Now           time.Time
	// Sequence is the task's sequence key (empty: none): tasks with the
	// same key run one at a time, in enqueue order (driver.Sequencer).
	// SkipDead lets a dead member of the sequence release the rest; by
	// default it holds them. The key's latest enqueue sets it.
	Sequence string
	SkipDead bool
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
// Timeout, LeaseOwner, LeaseExpiresAt, AttemptedAt, CreatedAt and Meta
// (which carries the enqueue's trace context); Get has the rest.
type ClaimParams struct {
	Queue string
	Limit int
	// Types, when not nil, are the only task types to claim: those the
	// worker has handlers for, so that it never takes a task it cannot run.
	// An empty, non-nil list claims nothing. Default nil: any type.
	Types []string
	// ExcludeTypes are task types not to claim (paused types). Default none.
	ExcludeTypes []string
	// Retried takes only tasks attempted before (due retries), the most
	// attempted first, then the oldest: a half-open brake's probes. Only
	// with Types.
	Retried        bool
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
	// Ended is when the attempt ended (its handler returned); zero: at the
	// write. Drivers that keep the history in Go (SQLite, MySQL) time the
	// attempt's run to it, so that the history's run times, which the ETA
	// reads, leave out the wait for the write.
	Ended time.Time
	// Task is the task as claimed (Queue, Type, Priority, Attempt, RunAt
	// and AttemptedAt are read): drivers that count transitions in Go
	// (SQLite, MySQL) count this one by it. Nil: the driver reads them.
	Task *TaskRow
	// FollowUps are tasks inserted in the same transaction as the
	// transition, only when it applies: the on_dead follow-ups of a task
	// being dead-lettered. Each carries an idempotency key, so a repeated
	// write inserts nothing more. Default none.
	FollowUps []InsertParams
}

// ClaimedParams asks for the tasks of Queue running under Owner whose
// lease is live at Now (the database's clock for a driver that uses it),
// at most Limit, by id.
type ClaimedParams struct {
	Queue string
	Owner string
	Now   time.Time
	Limit int
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
//
// IDs, for the bulk operations only, restricts them to those tasks (at most
// MaxBulkIDs, each positive); the other fields still apply, so a listed id
// that is not a dead or cancelled task is left alone. List does not take
// IDs.
type Filter struct {
	State          State
	Type           string
	Queue          string
	CreatedAfter   time.Time
	CreatedBefore  time.Time
	FinishedAfter  time.Time
	FinishedBefore time.Time
	BeforeID       int64
	// AfterID bounds List to ids above it (0: none): a window of ids
	// that a filter without an index of its own reads at most.
	AfterID int64
	Limit   int
	IDs     []int64
	// Types, for List only, selects tasks of any of these types (with Type
	// set too, a task must match both); ExcludeTypes and ExcludeQueues leave
	// out tasks of those types and queues. An entry that ends in "*"
	// matches every name starting with what precedes it: "keel.*" is
	// keel's own types. See ValidateNames.
	Types, ExcludeTypes, ExcludeQueues []string
}

// MaxFilterNames is how many names one of Filter's name lists may hold.
const MaxFilterNames = 50

// ValidateNames rejects Filter's name lists when an entry is not a valid
// name (see ValidName) or such a name followed by "*", or when a list holds
// more than MaxFilterNames entries.
func (f Filter) ValidateNames() error {
	for _, l := range []struct {
		what  string
		names []string
	}{{"type", f.Types}, {"excluded type", f.ExcludeTypes}, {"excluded queue", f.ExcludeQueues}} {
		if len(l.names) > MaxFilterNames {
			return fmt.Errorf("at most %d %ss at once, got %d", MaxFilterNames, l.what, len(l.names))
		}
		for _, n := range l.names {
			if !ValidName(strings.TrimSuffix(n, "*")) {
				return fmt.Errorf("invalid %s %q: a name is 1-128 letters, digits, '_', '.', ':' or '-', and may end in * to match every name that starts with it", l.what, n)
			}
		}
	}
	return nil
}

// MaxBulkIDs is how many ids one bulk operation's Filter.IDs may list.
const MaxBulkIDs = 1000

// ValidateBulk rejects a filter a bulk operation cannot take: it touches
// only dead or cancelled tasks, at most 10000 at a time, and selects them
// by type, queue, finish time and ids (at most MaxBulkIDs, positive) only.
// Drivers call it before running any SQL.
func (f Filter) ValidateBulk() error {
	switch {
	case f.State != StateDead && f.State != StateCancelled:
		return fmt.Errorf("state must be dead or cancelled, got %q", f.State)
	case f.Limit < 1 || f.Limit > 10000:
		return fmt.Errorf("limit must be in 1..10000, got %d", f.Limit)
	case !f.CreatedAfter.IsZero() || !f.CreatedBefore.IsZero():
		return errors.New("created_after and created_before do not apply to bulk operations")
	case f.BeforeID != 0 || f.AfterID != 0:
		return errors.New("before_id and after_id do not apply to bulk operations")
	case f.Types != nil || f.ExcludeTypes != nil || f.ExcludeQueues != nil:
		return errors.New("lists of types and excluded types or queues do not apply to bulk operations")
	case len(f.IDs) > MaxBulkIDs:
		return fmt.Errorf("at most %d ids at once, got %d", MaxBulkIDs, len(f.IDs))
	}
	for _, id := range f.IDs {
		if id <= 0 {
			return fmt.Errorf("a task id is positive, got %d", id)
		}
	}
	return nil
}

// MaxRecentLimit is the largest Limit of RecentFinished.
const MaxRecentLimit = 10000

// RecentParams asks RecentFinished for the newest Limit (1..MaxRecentLimit)
// succeeded and dead tasks, newest first by finish time, of those that
// finished at or after Since (zero: any time).
type RecentParams struct {
	Limit int
	Since time.Time
}

// Validate rejects params RecentFinished cannot take; drivers call it
// before running any SQL.
func (p RecentParams) Validate() error {
	if p.Limit < 1 || p.Limit > MaxRecentLimit {
		return fmt.Errorf("limit must be in 1..%d, got %d", MaxRecentLimit, p.Limit)
	}
	return nil
}

// AheadParams locates a pending task in its queue's line: CountAhead
// counts the ready tasks (run_at <= Now) of Queue with the same Priority
// that a claim takes before a task with Priority, RunAt and ID (run_at ASC,
// id ASC), of those with run_at at or after From, reading at most Limit of
// them. The live counters give the rest of the line.
type AheadParams struct {
	Queue    string
	Priority int
	RunAt    time.Time
	ID       int64
	Now      time.Time
	From     time.Time
	Limit    int
}

// ReconcileParams configures Driver.Reconcile.
type ReconcileParams struct {
	// MinutesBefore: history rows of earlier minutes are deleted. Zero
	// keeps them all.
	MinutesBefore time.Time
	// Now: the history rows a driver keeps per connection are folded for
	// the minutes before Now's. Zero: the wall clock.
	Now time.Time
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
	// Workers is how many tasks of each queue it runs at once.
	Workers map[string]int
	// Version is the keel version the process runs; Running how many
	// tasks it runs now.
	Version string
	Running int
}

// PruneNodesParams removes nodes whose last heartbeat is more than
// OlderThan before Now, and the source reports of unregistered nodes
// updated more than OlderThan before Now.
type PruneNodesParams struct {
	Now       time.Time
	OlderThan time.Duration
}

// MaxArchiveLimit is the largest Limit of Archive and PurgeArchive.
const MaxArchiveLimit = 10000

// ArchiveParams moves finished tasks from keel_tasks to keel_archive (see
// Driver.Archive): succeeded and cancelled tasks that finished before
// SucceededBefore, dead tasks that finished before DeadBefore, at most
// Limit (1..MaxArchiveLimit) in one call. A zero SucceededBefore or
// DeadBefore archives none of that class; both zero is refused. Now is
// stamped on the moved rows as archived_at (the database's clock for a
// driver that uses it).
type ArchiveParams struct {
	SucceededBefore time.Time
	DeadBefore      time.Time
	Limit           int
	Now             time.Time
}

// Validate rejects params Archive cannot take; drivers call it before
// running any SQL.
func (p ArchiveParams) Validate() error {
	switch {
	case p.Limit < 1 || p.Limit > MaxArchiveLimit:
		return fmt.Errorf("limit must be in 1..%d, got %d", MaxArchiveLimit, p.Limit)
	case p.SucceededBefore.IsZero() && p.DeadBefore.IsZero():
		return errors.New("succeeded_before or dead_before is required")
	case p.Now.IsZero():
		return errors.New("now is required")
	}
	return nil
}

// ArchiveResult is how many tasks one Archive call moved, per state.
type ArchiveResult struct {
	Succeeded int64
	Cancelled int64
	Dead      int64
}

// Total is the number of tasks moved.
func (r ArchiveResult) Total() int64 { return r.Succeeded + r.Cancelled + r.Dead }

// Add adds o's counts to r.
func (r *ArchiveResult) Add(o ArchiveResult) {
	r.Succeeded += o.Succeeded
	r.Cancelled += o.Cancelled
	r.Dead += o.Dead
}

// ValidatePurgeArchive rejects PurgeArchive arguments: before is required
// and limit must be in 1..MaxArchiveLimit. Drivers call it before running
// any SQL.
func ValidatePurgeArchive(before time.Time, limit int) error {
	switch {
	case before.IsZero():
		return errors.New("before is required")
	case limit < 1 || limit > MaxArchiveLimit:
		return fmt.Errorf("limit must be in 1..%d, got %d", MaxArchiveLimit, limit)
	}
	return nil
}
