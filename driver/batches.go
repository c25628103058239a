package driver

import (
	"context"
	"fmt"
	"time"
)

// BatchRow is one row of keel_batches: a group of tasks (its members carry
// TaskRow.BatchID) and the callbacks enqueued when they have all finished.
type BatchRow struct {
	ID int64
	// Total is how many members were inserted into the batch.
	Total int64
	// OnSuccess and OnFinish are the callbacks as stored at creation (a
	// document the caller wrote; nil: none).
	OnSuccess, OnFinish []byte
	// OnSuccessID and OnFinishID are the callback tasks enqueued when the
	// batch finished (0: none).
	OnSuccessID, OnFinishID int64
	// Succeeded, Dead and Cancelled count the members in each final state
	// when the batch finished (0 before).
	Succeeded, Dead, Cancelled int64
	CreatedAt                  time.Time
	// SealedAt is when the batch stopped taking members (zero: open).
	SealedAt time.Time
	// FinishedAt is when every member of the sealed batch had reached a
	// final state and the callbacks were enqueued (zero: not yet).
	FinishedAt time.Time
}

// BatchCounts are a batch's members by state, those in keel_archive
// included.
type BatchCounts struct {
	Pending, Running, Succeeded, Dead, Cancelled int64
	// LastPending is the pending member with the highest id (0: none),
	// which GetBatch reads to estimate when the batch finishes.
	LastPending int64
}

// Unfinished is how many members have not reached a final state.
func (c BatchCounts) Unfinished() int64 { return c.Pending + c.Running }

// Add counts n members in state s.
func (c *BatchCounts) Add(s State, n int64) {
	switch s {
	case StatePending:
		c.Pending += n
	case StateRunning:
		c.Running += n
	case StateSucceeded:
		c.Succeeded += n
	case StateDead:
		c.Dead += n
	case StateCancelled:
		c.Cancelled += n
	}
}

// CreateBatchParams creates a batch with its first members, in one
// transaction: all or none. A member whose idempotency key another task
// holds is returned Duplicate and does not join the batch.
type CreateBatchParams struct {
	Tasks []InsertParams
	// OnSuccess and OnFinish are stored as given (nil: none).
	OnSuccess, OnFinish []byte
	// Seal closes the batch to new members at once.
	Seal bool
	Now  time.Time
}

// AddBatchParams inserts more members into the open batch ID, in one
// transaction, and seals it after them when Seal is set.
type AddBatchParams struct {
	ID    int64
	Tasks []InsertParams
	Seal  bool
	Now   time.Time
}

// FinishBatchParams asks to finish batch ID if it is sealed, not finished,
// and none of its members is pending or running.
type FinishBatchParams struct {
	ID int64
	// Now is the clock of the finish, read in its transaction once the
	// members were counted: the finish and its callbacks are stamped after
	// the finish of every member they count, however long the transaction
	// waited for its turn.
	Now func() time.Time
	// Callbacks makes the tasks to enqueue with the batch's finish at now,
	// from the batch and its final counts: its on_success (nil: none) and
	// on_finish (nil: none). An error writes nothing.
	Callbacks func(b *BatchRow, c BatchCounts, now time.Time) (onSuccess, onFinish *InsertParams, err error)
}

// BatchFilter selects batches for ListBatches, newest first.
type BatchFilter struct {
	// Unfinished selects the batches not finished yet (open or sealed).
	Unfinished bool
	BeforeID   int64
	Limit      int // default 100
}

// MaxBatchMembersPage is the most members BatchMembers returns at once.
const MaxBatchMembersPage = 1000

// Batcher stores batches. Every SQL driver implements it.
type Batcher interface {
	// CreateBatch inserts a batch and its first members (see
	// CreateBatchParams) and returns the batch and the members' results.
	CreateBatch(ctx context.Context, params CreateBatchParams) (*BatchRow, []InsertResult, error)
	// AddToBatch inserts members into an open batch (see AddBatchParams):
	// ErrNotFound for no such batch, ErrWrongState for a sealed one.
	AddToBatch(ctx context.Context, params AddBatchParams) (*BatchRow, []InsertResult, error)
	// SealBatch closes batch id to new members and returns it; sealing a
	// sealed batch changes nothing. ErrNotFound for no such batch.
	SealBatch(ctx context.Context, id int64, now time.Time) (*BatchRow, error)
	// GetBatch loads batch id and counts its members by state, or returns
	// ErrNotFound.
	GetBatch(ctx context.Context, id int64) (*BatchRow, BatchCounts, error)
	// ListBatches returns the batches f selects, newest first.
	ListBatches(ctx context.Context, f BatchFilter) ([]BatchRow, error)
	// BatchMembers returns up to limit (1..MaxBatchMembersPage) members
	// of batch id still in keel_tasks with ids above afterID, by id.
	BatchMembers(ctx context.Context, id, afterID int64, limit int) ([]TaskRow, error)
	// UnfinishedBatches returns up to limit sealed batches not finished
	// yet, oldest first: those FinishBatch may finish.
	UnfinishedBatches(ctx context.Context, limit int) ([]int64, error)
	// FinishBatch finishes the batch if it is sealed, not finished, and
	// has no pending or running member: in one transaction it records the
	// final counts and the finish time and inserts the callbacks
	// params.Callbacks makes. It returns the batch and whether this call
	// finished it; two calls at once finish it once.
	FinishBatch(ctx context.Context, params FinishBatchParams) (*BatchRow, bool, error)
	// PruneBatches deletes up to limit batches that finished before
	// before, oldest first, and returns how many it deleted. Their
	// members are left alone.
	PruneBatches(ctx context.Context, before time.Time, limit int) (int64, error)
}

// CheckMembersPage checks BatchMembers' arguments.
func CheckMembersPage(afterID int64, limit int) error {
	if afterID < 0 {
		return fmt.Errorf("after id %d is negative", afterID)
	}
	if limit < 1 || limit > MaxBatchMembersPage {
		return fmt.Errorf("limit %d is outside 1..%d", limit, MaxBatchMembersPage)
	}
	return nil
}
