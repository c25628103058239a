package keel

import (
	"context"
	"encoding/json"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/batch"
	"github.com/keelq/keel/internal/enqueue"
)

// Batch is a group of tasks enqueued together, in one transaction, with
// callbacks: OnSuccess is enqueued once every member succeeded, OnFinish
// once every member reached a final state (succeeded, dead or cancelled).
// Each callback is a task (its payload is a BatchEvent) enqueued exactly
// once, within a leader's pass (at most a second) after the last member
// finished. A member whose idempotency key another task holds is returned
// Duplicate and does not join the batch. See docs/batches.md.
type Batch struct {
	Tasks []TaskSpec
	// OnSuccess and OnFinish are the callbacks (nil: none). Their type must
	// be one this client may enqueue; their payload is BatchEvent.Data.
	// A delay or idempotency key among their options does not apply.
	OnSuccess, OnFinish *TaskSpec
	// Open leaves the batch open for more members (Batches.Add); it
	// finishes only once sealed (Batches.Seal). Default: sealed at once.
	Open bool
}

// BatchEvent is the payload of a batch's callback task: which batch, which
// callback ("on_success" or "on_finish"), its members' final counts and
// the payload the callback was given. Page through the members and their
// results with Batches.Members.
type BatchEvent struct {
	BatchID   int64           `json:"batch_id"`
	Kind      string          `json:"kind"`
	Total     int64           `json:"total"`
	Succeeded int64           `json:"succeeded"`
	Dead      int64           `json:"dead"`
	Cancelled int64           `json:"cancelled"`
	Data      json.RawMessage `json:"data"`
}

// BatchState is where a batch stands.
type BatchState string

// The batch states.
const (
	// BatchOpen: it takes more members; it finishes only once sealed.
	BatchOpen BatchState = "open"
	// BatchRunning: sealed, with members still pending or running.
	BatchRunning BatchState = "running"
	// BatchFinished: every member reached a final state and the callbacks
	// were enqueued.
	BatchFinished BatchState = "finished"
)

// BatchInfo is a batch and its members' counts by state (archived members
// included).
type BatchInfo struct {
	ID    int64
	State BatchState
	// Total is how many members joined the batch.
	Total                                        int64
	Pending, Running, Succeeded, Dead, Cancelled int64
	// Progress is the share of members in a final state, 0..1.
	Progress                        float64
	CreatedAt, SealedAt, FinishedAt time.Time
	// OnSuccessID and OnFinishID are the callback tasks, once enqueued (0
	// before, and for a callback the batch has not, or an on_success of a
	// batch with a failed member).
	OnSuccessID, OnFinishID int64
	// ETA is when the batch's last pending member is estimated to finish
	// (see Estimate); zero when nothing is pending or no estimate can be
	// made. Get fills it; List does not.
	ETA time.Time
}

// EnqueueBatch creates a batch (see Batch) and its members in one
// transaction: all or none. It returns the batch and the members in b's
// order. Bad input, a callback's included, returns an error wrapping
// ErrInvalid, ErrUnknownType or ErrPayloadTooLarge and writes nothing.
func (c *Client) EnqueueBatch(ctx context.Context, b Batch) (*BatchInfo, []*TaskInfo, error) {
	s := batch.Spec{Members: specs(b.Tasks), Open: b.Open}
	if b.OnSuccess != nil {
		s.OnSuccess = &specs([]TaskSpec{*b.OnSuccess})[0]
	}
	if b.OnFinish != nil {
		s.OnFinish = &specs([]TaskSpec{*b.OnFinish})[0]
	}
	row, results, err := c.batches.Create(ctx, s)
	if err != nil {
		return nil, nil, err
	}
	return batchInfo(row, driver.BatchCounts{Pending: row.Total}), c.enqueued(results), nil
}

// Batches returns the client's batch calls: add members, seal, get, list
// and page through members.
func (c *Client) Batches() *Batches { return &Batches{c: c} }

// Batches are a client's calls on its batches (Client.Batches).
type Batches struct{ c *Client }

// Add enqueues tasks into the open batch id, in one transaction, and
// seals it after them when seal is set (with no tasks, seal only seals).
// No such batch is ErrNotFound; a sealed one ErrWrongState.
func (b *Batches) Add(ctx context.Context, id int64, tasks []TaskSpec, seal bool) ([]*TaskInfo, error) {
	_, results, err := b.c.batches.Add(ctx, id, specs(tasks), seal)
	if err != nil {
		return nil, err
	}
	return b.c.enqueued(results), nil
}

// Seal closes batch id to new members: it finishes once they all have.
// Sealing a sealed batch changes nothing.
func (b *Batches) Seal(ctx context.Context, id int64) (*BatchInfo, error) {
	if _, err := b.c.batches.Seal(ctx, id); err != nil {
		return nil, err
	}
	return b.Get(ctx, id)
}

// Get returns batch id with its counts and ETA, or ErrNotFound.
func (b *Batches) Get(ctx context.Context, id int64) (*BatchInfo, error) {
	row, counts, err := b.c.batches.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	info := batchInfo(row, counts)
	if counts.LastPending > 0 {
		if last, err := b.c.Get(ctx, counts.LastPending); err == nil {
			if est, err := b.c.Estimate(ctx, last); err == nil && est != nil && est.Status == ETAEstimated {
				info.ETA = est.Finish
			}
		}
	}
	return info, nil
}

// BatchFilter selects batches for Batches.List, newest first.
type BatchFilter struct {
	// Unfinished selects the batches not finished yet.
	Unfinished bool
	// BeforeID pages: only batches with lower ids.
	BeforeID int64
	// Limit defaults to 100, at most 1000.
	Limit int
}

// List returns the batches f selects, newest first, with the counts they
// finished with (a batch not finished yet shows only its Total: Get counts
// its members).
func (b *Batches) List(ctx context.Context, f BatchFilter) ([]*BatchInfo, error) {
	rows, err := b.c.batches.List(ctx, driver.BatchFilter(f))
	if err != nil {
		return nil, err
	}
	out := make([]*BatchInfo, len(rows))
	for i := range rows {
		out[i] = batchInfo(&rows[i], driver.BatchCounts{Succeeded: rows[i].Succeeded, Dead: rows[i].Dead,
			Cancelled: rows[i].Cancelled})
	}
	return out, nil
}

// Members returns up to limit (1..1000) members of batch id with ids above
// afterID, by id, with their results: page with the last id seen.
// Archived members are not listed (Get finds them by id).
func (b *Batches) Members(ctx context.Context, id, afterID int64, limit int) ([]*TaskInfo, error) {
	rows, err := b.c.batches.Members(ctx, id, afterID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*TaskInfo, len(rows))
	for i := range rows {
		out[i] = infoFromRow(&rows[i])
	}
	return out, nil
}

// newBatches is the client's batch book.
func newBatches(c *Client) *batch.Book {
	b := &batch.Book{Enq: c.enq, Now: c.cfg.Now, Wrap: unavailable}
	if s, ok := c.drv.(driver.Batcher); ok {
		b.Store = s
	}
	return b
}

// batchInfo converts a batch row and its counts.
func batchInfo(r *driver.BatchRow, n driver.BatchCounts) *BatchInfo {
	info := &BatchInfo{ID: r.ID, State: BatchRunning, Total: r.Total, Pending: n.Pending, Running: n.Running,
		Succeeded: n.Succeeded, Dead: n.Dead, Cancelled: n.Cancelled, CreatedAt: r.CreatedAt, SealedAt: r.SealedAt,
		FinishedAt: r.FinishedAt, OnSuccessID: r.OnSuccessID, OnFinishID: r.OnFinishID}
	switch {
	case !r.FinishedAt.IsZero():
		info.State = BatchFinished
		info.Succeeded, info.Dead, info.Cancelled = r.Succeeded, r.Dead, r.Cancelled
	case r.SealedAt.IsZero():
		info.State = BatchOpen
	}
	if r.Total > 0 {
		info.Progress = float64(info.Succeeded+info.Dead+info.Cancelled) / float64(r.Total)
	}
	return info
}

// specs converts tasks for internal/enqueue.
func specs(tasks []TaskSpec) []enqueue.Spec {
	out := make([]enqueue.Spec, len(tasks))
	for i, j := range tasks {
		out[i] = enqueue.Spec{Type: j.Type, Payload: j.Payload, Options: enqueue.Funcs(j.Options)}
	}
	return out
}

// batchInterval is how often the leader finishes the batches whose
// members have all finished.
const batchInterval = time.Second

// newBatchFinisher is the leader's batch finisher.
func newBatchFinisher(c *Client) *batch.Finisher {
	var retention time.Duration
	if c.cfg.DeleteArchivedAfter > 0 { // kept while their members could be: archived, then deleted
		retention = max(c.cfg.RetainSucceeded, c.cfg.RetainDead) + c.cfg.DeleteArchivedAfter
	}
	return batch.New(batch.Config{Store: c.batches.Store, Now: c.cfg.Now, Logger: c.cfg.Logger, Retention: retention,
		Leading: func() bool { return c.eng.Load().Leading() },
		Finished: func(b *driver.BatchRow) {
			if c.obs.active() {
				oc := OutcomeSucceeded
				if !batch.Succeeded(b) {
					oc = OutcomeFailed
				}
				c.obs.emit(Event{Kind: EventBatchFinished, BatchID: b.ID, Outcome: oc})
			}
		}})
}
