package driver

import (
	"time"
)

// Row types: what the driver reads back from its tables.

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

// HeldUntil is the run time of a pending task held back until keel
// releases it: a task waiting for its dependencies to succeed, or a
// sequence's member waiting for the one before it. No claim reaches it;
// the release sets the run time to the moment of release. It is the last
// whole second every database stores, and no enqueue may ask for it. (A
// whole second: PostgreSQL's live counters take a run time's minute
// through its Unix microseconds as a float8, exact for whole seconds of
// year 9999 but not for its last microsecond, which they would file under
// the next minute.)
var HeldUntil = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// Held reports whether a pending task with run time runAt is held back.
func Held(runAt time.Time) bool { return runAt.Equal(HeldUntil) }

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
	// OutcomeCancelled: the task was cancelled while this attempt ran
	// (Driver.Cancel records it, with the cancel's time as its end and
	// CancelledWhileRunning as its error); the attempt's own outcome, if
	// its worker reports one, is rejected by fencing.
	OutcomeCancelled Outcome = "cancelled"
)

// CancelledWhileRunning is the error of an attempt recorded with
// OutcomeCancelled.
const CancelledWhileRunning = "cancelled while running"

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

// TaskRow is one row of keel_tasks, or of keel_archive (ArchivedAt set).
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
	// BatchID is the batch the task is a member of (Batcher); 0 for none.
	// Claim does not return it.
	BatchID int64
	// Sequence is the task's sequence key (Sequencer); empty for none.
	// Claim returns it, so that the finish of a member can release the
	// next one.
	Sequence string
	// ArchivedAt is when the task was moved to keel_archive (Driver.Archive);
	// zero for a task still in keel_tasks.
	ArchivedAt time.Time
	// Steps are the task's stored durable steps (Driver.SaveStep), ordered
	// by time; nil when it has none. Claim does not return them.
	Steps []StepRow
}

// QueueCount is the number of tasks of one queue and type in one state.
type QueueCount struct {
	Queue string
	Type  string
	State State
	Count int64
}

// KindRetrying is the live counters' name for pending tasks that were
// attempted before (attempt > 0); CountRow.Kind is otherwise the state.
const KindRetrying = "retrying"

// CountRow is one live counter (keel_counts): how many tasks of Queue and
// Type are of Kind, a state with pending split in two: "pending" (never
// attempted) and KindRetrying. Pending and retrying rows are kept per
// Priority and Due, the minute their run_at falls in (Unix seconds / 60,
// rounded down), so a reader splits ready from scheduled tasks and finds
// the oldest ready one without reading the task table; other kinds have
// Priority and Due 0. The drivers keep the counters in the transaction of
// every write to keel_tasks, so they never drift from it; Reconcile checks.
type CountRow struct {
	Queue    string
	Type     string
	Kind     string
	Priority int
	Due      int64
	N        int64
}

// CountKind is the kind a task in state with attempt counts as.
func CountKind(state State, attempt int) string {
	if state == StatePending && attempt > 0 {
		return KindRetrying
	}
	return string(state)
}

// DueMinute is the minute t falls in: Unix seconds / 60, rounded down.
func DueMinute(t time.Time) int64 {
	s := t.Unix()
	if s < 0 {
		return (s - 59) / 60
	}
	return s / 60
}

// MinuteRow is one minute of one queue and type's history (keel_minutes),
// counted by the same writes as the live counters, at the minute of the
// write (Minute, Unix seconds / 60):
//   - Enqueued: tasks inserted; Hits: inserts that found their idempotency
//     key held and returned the existing task (counted on that task's queue
//     and type).
//   - Attempts: claims (pending to running).
//   - Ended: attempts that ended without being given back, that is every
//     transition out of running except a snooze and a release on shutdown;
//     Failed: those that recorded an error (any outcome); DurationMS: their
//     summed run time (the write's instant minus attempted_at, each
//     rounded down to the millisecond); FirstMS and LastMS: the first and
//     last such end in the minute (Unix milliseconds), 0 when none.
//   - Succeeded, Dead, Cancelled: transitions into those states.
type MinuteRow struct {
	Minute     int64
	Queue      string
	Type       string
	Enqueued   int64
	Hits       int64
	Attempts   int64
	Ended      int64
	Failed     int64
	Succeeded  int64
	Dead       int64
	Cancelled  int64
	DurationMS int64
	FirstMS    int64
	LastMS     int64
}

// Add adds o's counts to m (its key is not compared): FirstMS becomes the
// least of the two that is not 0, LastMS the greatest.
func (m *MinuteRow) Add(o MinuteRow) {
	m.Enqueued += o.Enqueued
	m.Hits += o.Hits
	m.Attempts += o.Attempts
	m.Ended += o.Ended
	m.Failed += o.Failed
	m.Succeeded += o.Succeeded
	m.Dead += o.Dead
	m.Cancelled += o.Cancelled
	m.DurationMS += o.DurationMS
	if o.FirstMS != 0 && (m.FirstMS == 0 || o.FirstMS < m.FirstMS) {
		m.FirstMS = o.FirstMS
	}
	m.LastMS = max(m.LastMS, o.LastMS)
}

// NodeRow is one row of keel_nodes: a worker process and its last heartbeat.
type NodeRow struct {
	Name        string
	Host        string
	PID         int
	Queues      []string
	StartedAt   time.Time
	HeartbeatAt time.Time
	// Workers is how many tasks of each queue it runs at once (empty for
	// a row an older keel wrote).
	Workers map[string]int
	// Version is the keel version it runs ("" for an older keel);
	// Running how many tasks it ran at its last heartbeat.
	Version string
	Running int
}

// FinishedSample is what RecentFinished reads of one finished task: its
// columns for latency and retry figures, never its payload.
type FinishedSample struct {
	ID    int64
	Queue string
	Type  string
	State State // succeeded or dead
	// Attempt is the attempts the task used (snoozes give theirs back).
	Attempt   int
	CreatedAt time.Time
	// RunAt is when the last attempt became due (a retry or snooze moves
	// it).
	RunAt time.Time
	// AttemptedAt is when the last attempt started; zero if it never ran.
	AttemptedAt time.Time
	FinishedAt  time.Time
}
