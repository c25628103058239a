// Package batch groups tasks of a keel.Client with callbacks: a batch's
// members are enqueued together, in one transaction, and its OnSuccess
// callback is enqueued once every member succeeded, its OnFinish once
// every member reached a final state (succeeded, dead or cancelled).
// Each callback is a task whose payload is an Event. See docs/batches.md.
package batch

import (
	"context"
	"encoding/json"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/access"
	ibatch "github.com/keelq/keel/internal/batch"
	"github.com/keelq/keel/internal/conv"
	"github.com/keelq/keel/internal/enqueue"
)

// Spec is a group of tasks enqueued together, in one transaction, with
// callbacks: OnSuccess is enqueued once every member succeeded, OnFinish
// once every member reached a final state (succeeded, dead or cancelled).
// Each callback is a task (its payload is an Event) enqueued exactly
// once, within a leader's pass (at most a second) after the last member
// finished. A member whose idempotency key another task holds is returned
// Duplicate and does not join the batch.
type Spec struct {
	Tasks []keel.TaskSpec
	// OnSuccess and OnFinish are the callbacks (nil: none). Their type must
	// be one the client may enqueue; their payload is Event.Data.
	// A delay or idempotency key among their options does not apply.
	OnSuccess, OnFinish *keel.TaskSpec
	// Open leaves the batch open for more members (Add); it finishes only
	// once sealed (Seal). Default: sealed at once.
	Open bool
}

// Event is the payload of a batch's callback task: which batch, which
// callback ("on_success" or "on_finish"), its members' final counts and
// the payload the callback was given. Page through the members and their
// results with Members.
type Event struct {
	BatchID   int64           `json:"batch_id"`
	Kind      string          `json:"kind"`
	Total     int64           `json:"total"`
	Succeeded int64           `json:"succeeded"`
	Dead      int64           `json:"dead"`
	Cancelled int64           `json:"cancelled"`
	Data      json.RawMessage `json:"data"`
}

// State is where a batch stands.
type State string

// The batch states.
const (
	// Open: it takes more members; it finishes only once sealed.
	Open State = "open"
	// Running: sealed, with members still pending or running.
	Running State = "running"
	// Finished: every member reached a final state and the callbacks were
	// enqueued.
	Finished State = "finished"
)

// Info is a batch and its members' counts by state (archived members
// included).
type Info struct {
	ID    int64
	State State
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
	// (see keel.Client.Estimate); zero when nothing is pending or no
	// estimate can be made. Get fills it; List does not.
	ETA time.Time
}

// Filter selects batches for List, newest first.
type Filter struct {
	// Unfinished selects the batches not finished yet.
	Unfinished bool
	// BeforeID pages: only batches with lower ids.
	BeforeID int64
	// Limit defaults to 100, at most 1000.
	Limit int
}

// Enqueue creates a batch (see Spec) and its members on c in one
// transaction: all or none. It returns the batch and the members in s's
// order. Bad input, a callback's included, returns an error wrapping
// keel.ErrInvalid, keel.ErrUnknownType or keel.ErrPayloadTooLarge and
// writes nothing.
func Enqueue(ctx context.Context, c *keel.Client, s Spec) (*Info, []*keel.TaskInfo, error) {
	in := ibatch.Spec{Members: specs(s.Tasks), Open: s.Open}
	if s.OnSuccess != nil {
		in.OnSuccess = &specs([]keel.TaskSpec{*s.OnSuccess})[0]
	}
	if s.OnFinish != nil {
		in.OnFinish = &specs([]keel.TaskSpec{*s.OnFinish})[0]
	}
	p := access.Of(c)
	row, results, err := book(p).Create(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	return info(row, driver.BatchCounts{Pending: row.Total}), p.Enqueued(results).([]*keel.TaskInfo), nil
}

// Add enqueues tasks into c's open batch id, in one transaction, and
// seals it after them when seal is set (with no tasks, seal only seals).
// No such batch is keel.ErrNotFound; a sealed one keel.ErrWrongState.
func Add(ctx context.Context, c *keel.Client, id int64, tasks []keel.TaskSpec, seal bool) ([]*keel.TaskInfo, error) {
	p := access.Of(c)
	_, results, err := book(p).Add(ctx, id, specs(tasks), seal)
	if err != nil {
		return nil, err
	}
	return p.Enqueued(results).([]*keel.TaskInfo), nil
}

// Seal closes c's batch id to new members: it finishes once they all
// have. Sealing a sealed batch changes nothing.
func Seal(ctx context.Context, c *keel.Client, id int64) (*Info, error) {
	if _, err := book(access.Of(c)).Seal(ctx, id); err != nil {
		return nil, err
	}
	return Get(ctx, c, id)
}

// Get returns c's batch id with its counts and ETA, or keel.ErrNotFound.
func Get(ctx context.Context, c *keel.Client, id int64) (*Info, error) {
	p := access.Of(c)
	row, counts, err := book(p).Get(ctx, id)
	if err != nil {
		return nil, err
	}
	b := info(row, counts)
	if counts.LastPending > 0 {
		b.ETA = p.Finish(ctx, counts.LastPending)
	}
	return b, nil
}

// List returns the batches of c that f selects, newest first, with the
// counts they finished with (a batch not finished yet shows only its
// Total: Get counts its members).
func List(ctx context.Context, c *keel.Client, f Filter) ([]*Info, error) {
	rows, err := book(access.Of(c)).List(ctx, driver.BatchFilter(f))
	if err != nil {
		return nil, err
	}
	return conv.Rows(rows, func(r *driver.BatchRow) *Info {
		return info(r, driver.BatchCounts{Succeeded: r.Succeeded, Dead: r.Dead, Cancelled: r.Cancelled})
	}), nil
}

// Members returns up to limit (1..1000) members of c's batch id with ids
// above afterID, by id, with their results: page with the last id seen.
// Archived members are not listed (keel.Client.Get finds them by id).
func Members(ctx context.Context, c *keel.Client, id, afterID int64, limit int) ([]*keel.TaskInfo, error) {
	p := access.Of(c)
	rows, err := book(p).Members(ctx, id, afterID, limit)
	if err != nil {
		return nil, err
	}
	return conv.Rows(rows, func(r *driver.TaskRow) *keel.TaskInfo { return p.Info(r).(*keel.TaskInfo) }), nil
}

// book is the batch book of the client p comes from.
func book(p *access.Parts) *ibatch.Book {
	b := &ibatch.Book{Enq: p.Enq, Now: p.Now, Wrap: p.Wrap}
	if s, ok := p.Driver.(driver.Batcher); ok {
		b.Store = s
	}
	return b
}

// info converts a batch row and its counts.
func info(r *driver.BatchRow, n driver.BatchCounts) *Info {
	b := &Info{ID: r.ID, State: Running, Total: r.Total, Pending: n.Pending, Running: n.Running,
		Succeeded: n.Succeeded, Dead: n.Dead, Cancelled: n.Cancelled, CreatedAt: r.CreatedAt, SealedAt: r.SealedAt,
		FinishedAt: r.FinishedAt, OnSuccessID: r.OnSuccessID, OnFinishID: r.OnFinishID}
	switch {
	case !r.FinishedAt.IsZero():
		b.State = Finished
		b.Succeeded, b.Dead, b.Cancelled = r.Succeeded, r.Dead, r.Cancelled
	case r.SealedAt.IsZero():
		b.State = Open
	}
	if r.Total > 0 {
		b.Progress = float64(b.Succeeded+b.Dead+b.Cancelled) / float64(r.Total)
	}
	return b
}

// specs converts tasks for internal/enqueue.
func specs(tasks []keel.TaskSpec) []enqueue.Spec {
	out := make([]enqueue.Spec, len(tasks))
	for i, t := range tasks {
		out[i] = enqueue.Spec{Type: t.Type, Payload: t.Payload, Options: enqueue.Funcs(t.Options)}
	}
	return out
}
