package keel

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/digest"
)

// State is a task's lifecycle state.
type State = driver.State

// Task states: pending (ready, scheduled or waiting to retry), running,
// and the terminal succeeded, dead (the dead letter, kept for requeue) and
// cancelled.
const (
	StatePending   = driver.StatePending
	StateRunning   = driver.StateRunning
	StateSucceeded = driver.StateSucceeded
	StateDead      = driver.StateDead
	StateCancelled = driver.StateCancelled
)

// AttemptError is one failed attempt in a task's history.
type AttemptError = driver.AttemptError

// Task is what a handler receives: the decoded arguments and the task's
// identity. Args holds the payload decoded into T.
type Task[T any] struct {
	ID          int64
	Type        string
	Queue       string
	Priority    int
	Attempt     int // 1 on the first run
	MaxAttempts int
	// Snoozes counts the task's snoozes so far (they use no attempt);
	// past Config.MaxSnoozes the next snooze dead-letters it.
	Snoozes int
	// Delivery numbers this run of the task among all its runs, from 1; it
	// never repeats. Attempt can: a run cut off by a graceful stop gives
	// its attempt back, so the next run has the same Attempt but a larger
	// Delivery. Numbers can be skipped (it counts the task's claims).
	Delivery  int64
	CreatedAt time.Time
	Args      T
	Payload   json.RawMessage
	result    json.RawMessage
}

// SetResult stores v (encoded as JSON) as the task's result when it
// succeeds, for callers who query it later.
func (t *Task[T]) SetResult(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("keel: encode result: %w", err)
	}
	t.result = b
	return nil
}

// Result returns what SetResult stored, or nil.
func (t *Task[T]) Result() json.RawMessage { return t.result }

// TaskInfo is a task as stored: what Enqueue and Get return.
type TaskInfo struct {
	ID          int64
	Queue       string
	Type        string
	Priority    int
	State       State
	Attempt     int // attempts started so far
	MaxAttempts int
	// Snoozes counts the snoozes since the task was enqueued or requeued
	// (Retry, RetryMatching); see Config.MaxSnoozes.
	Snoozes int
	Payload json.RawMessage
	Result  json.RawMessage // set by the handler on success, or nil
	Errors  []AttemptError  // one entry per failed attempt, the last 20
	Timeout time.Duration
	RunAt   time.Time // earliest start of the next attempt
	// Held is set for a pending task keel holds back: one waiting for the
	// member of its sequence before it to finish (Sequence), or for its
	// dependencies to succeed. Its RunAt is then 9999-12-31T23:59:59Z
	// until keel releases it.
	Held bool
	// Sequence is the task's sequence key (Sequence); empty for none.
	Sequence    string
	CreatedAt   time.Time // first arrival
	StartedAt   time.Time // first start; zero until then
	AttemptedAt time.Time // start of the latest attempt
	FinishedAt  time.Time // zero until succeeded, dead or cancelled
	UpdatedAt   time.Time
	// Node is the process running the current attempt, or the one that ran
	// the successful attempt; empty otherwise.
	Node string
	Meta json.RawMessage
	// IdempotencyKey is the caller's own key (the IdempotencyKey option, or
	// the API's idempotency_key), as given; empty for a task without one.
	IdempotencyKey string
	// UniqueDigest is the key UniqueBy made (a digest of the type, the
	// natural key and the payload: "u:" and 64 hex digits); empty unless
	// the task was enqueued with UniqueBy.
	UniqueDigest string
	// Archived is set for a task moved to the archive after its retention
	// (Config.RetainSucceeded, Config.RetainDead), at ArchivedAt: Get
	// still finds it, but it can no longer be cancelled or retried, and
	// it holds no idempotency key.
	Archived   bool
	ArchivedAt time.Time // zero unless Archived
	// BatchID is the batch the task is a member of (package batch); 0 for
	// none.
	BatchID int64
	// Duplicate is set by Enqueue when an idempotency key matched an existing
	// task, which is returned instead of inserting a new one.
	Duplicate bool
	// Steps are the task's finished durable steps (Step), oldest first;
	// nil when it has none.
	Steps []StepInfo
}

// StepInfo is one finished durable step of a task (see Step).
type StepInfo struct {
	Name string
	// Result is the step's JSON result.
	Result json.RawMessage
	// At is when it was stored, by the task's attempt Attempt.
	At      time.Time
	Attempt int
}

func infoFromRow(r *driver.TaskRow) *TaskInfo {
	info := &TaskInfo{
		ID: r.ID, Queue: r.Queue, Type: r.Type, Priority: r.Priority, State: r.State,
		Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, Snoozes: r.Snoozes, Payload: r.Payload, Result: r.Result,
		Errors: r.Errors, Timeout: r.Timeout, RunAt: r.RunAt, CreatedAt: r.CreatedAt,
		StartedAt: r.StartedAt, AttemptedAt: r.AttemptedAt, FinishedAt: r.FinishedAt,
		UpdatedAt: r.UpdatedAt, Node: r.LeaseOwner, Meta: r.Meta,
		Archived: !r.ArchivedAt.IsZero(), ArchivedAt: r.ArchivedAt, BatchID: r.BatchID,
		IdempotencyKey: digest.ExplicitKeyOf(r.IdemKey), UniqueDigest: digest.UniqueDigestOf(r.IdemKey),
	}
	info.Held, info.Sequence = r.State == StatePending && driver.Held(r.RunAt), r.Sequence
	for _, s := range r.Steps {
		info.Steps = append(info.Steps, StepInfo{Name: s.Name, Result: s.Result, At: s.At, Attempt: s.Attempt})
	}
	return info
}
