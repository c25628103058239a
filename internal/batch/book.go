package batch

import (
	"context"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/kerr"
)

// Book creates batches and adds members to them: members and callbacks are
// checked and prepared as any enqueue is, then written by the driver in
// one transaction.
type Book struct {
	// Store keeps the batches; nil when the driver keeps none.
	Store driver.Batcher
	Enq   *enqueue.Inserter
	Now   func() time.Time
	// Wrap turns a driver's error into the error returned (the client
	// marks an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error
}

// ErrNoBatches is returned when the driver keeps no batches.
var ErrNoBatches = fmt.Errorf("%w: this driver keeps no batches", driver.ErrWrongState)

// Spec is a batch as its creator describes it.
type Spec struct {
	Members             []enqueue.Spec
	OnSuccess, OnFinish *enqueue.Spec
	// Open leaves the batch open for more members (Add); it finishes only
	// once sealed.
	Open bool
}

// Create checks s and creates the batch with its members in one
// transaction: all or none. A callback's type must be one this client
// may enqueue (handled or declared); its delay and idempotency key, if
// given, do not apply: it is enqueued when the batch finishes, once.
func (b *Book) Create(ctx context.Context, s Spec) (*driver.BatchRow, []driver.InsertResult, error) {
	if b.Store == nil {
		return nil, nil, ErrNoBatches
	}
	if len(s.Members) == 0 && !s.Open {
		return nil, nil, kerr.Invalid("a batch needs at least one task, unless it is created open")
	}
	docs := make([][]byte, 2)
	for i, cb := range []struct {
		name string
		spec *enqueue.Spec
	}{{OnSuccess, s.OnSuccess}, {OnFinish, s.OnFinish}} {
		if cb.spec == nil {
			continue
		}
		params, err := b.Enq.Prepare(ctx, []enqueue.Spec{*cb.spec}, false)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", cb.name, err)
		}
		if docs[i], err = Encode(&params[0]); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", cb.name, err)
		}
	}
	p := driver.CreateBatchParams{OnSuccess: docs[0], OnFinish: docs[1], Seal: !s.Open}
	var row *driver.BatchRow
	if len(s.Members) == 0 {
		p.Now = b.Now()
		row, _, err := b.Store.CreateBatch(ctx, p)
		if err != nil {
			return nil, nil, b.wrap(ctx, err)
		}
		return row, nil, nil
	}
	results, err := b.Enq.Enqueue(ctx, s.Members, false, func(params []driver.InsertParams) ([]driver.InsertResult, error) {
		p.Tasks, p.Now = params, params[0].Now
		var out []driver.InsertResult
		var err error
		row, out, err = b.Store.CreateBatch(ctx, p)
		return out, err
	})
	if err != nil {
		return nil, nil, err
	}
	return row, results, nil
}

// Add inserts members into the open batch id, in one transaction, and
// seals it after them when seal is set. With no members it only seals.
// No such batch is driver.ErrNotFound; a sealed one driver.ErrWrongState.
func (b *Book) Add(ctx context.Context, id int64, members []enqueue.Spec, seal bool) (*driver.BatchRow, []driver.InsertResult, error) {
	if b.Store == nil {
		return nil, nil, ErrNoBatches
	}
	if err := CheckID(id); err != nil {
		return nil, nil, err
	}
	if len(members) == 0 {
		if !seal {
			return nil, nil, kerr.Invalid("no tasks to add to batch %d", id)
		}
		row, err := b.Seal(ctx, id)
		return row, nil, err
	}
	var row *driver.BatchRow
	results, err := b.Enq.Enqueue(ctx, members, false, func(params []driver.InsertParams) ([]driver.InsertResult, error) {
		var out []driver.InsertResult
		var err error
		row, out, err = b.Store.AddToBatch(ctx, driver.AddBatchParams{ID: id, Tasks: params, Seal: seal, Now: params[0].Now})
		return out, err
	})
	if err != nil {
		return nil, nil, err
	}
	return row, results, nil
}

// Seal closes batch id to new members; sealing a sealed batch changes
// nothing.
func (b *Book) Seal(ctx context.Context, id int64) (*driver.BatchRow, error) {
	if b.Store == nil {
		return nil, ErrNoBatches
	}
	if err := CheckID(id); err != nil {
		return nil, err
	}
	row, err := b.Store.SealBatch(ctx, id, b.Now())
	if err != nil {
		return nil, b.wrap(ctx, err)
	}
	return row, nil
}

// Get loads batch id with its members' counts.
func (b *Book) Get(ctx context.Context, id int64) (*driver.BatchRow, driver.BatchCounts, error) {
	if b.Store == nil {
		return nil, driver.BatchCounts{}, ErrNoBatches
	}
	if err := CheckID(id); err != nil {
		return nil, driver.BatchCounts{}, err
	}
	row, counts, err := b.Store.GetBatch(ctx, id)
	if err != nil {
		return nil, driver.BatchCounts{}, b.wrap(ctx, err)
	}
	return row, counts, nil
}

// List returns the batches f selects, newest first; Limit defaults to
// 100, at most 1000.
func (b *Book) List(ctx context.Context, f driver.BatchFilter) ([]driver.BatchRow, error) {
	if b.Store == nil {
		return nil, ErrNoBatches
	}
	if f.Limit < 0 || f.Limit > 1000 || f.BeforeID < 0 {
		return nil, kerr.Invalid("batch listing: limit %d must be 0..1000 and before id %d not negative", f.Limit, f.BeforeID)
	}
	rows, err := b.Store.ListBatches(ctx, f)
	if err != nil {
		return nil, b.wrap(ctx, err)
	}
	return rows, nil
}

// Members returns up to limit members of batch id with ids above afterID,
// by id: a callback's handler pages through them with the last id it saw.
// Archived members are not listed.
func (b *Book) Members(ctx context.Context, id, afterID int64, limit int) ([]driver.TaskRow, error) {
	if b.Store == nil {
		return nil, ErrNoBatches
	}
	if err := CheckID(id); err != nil {
		return nil, err
	}
	if err := driver.CheckMembersPage(afterID, limit); err != nil {
		return nil, kerr.Invalid("members of batch %d: %v", id, err)
	}
	rows, err := b.Store.BatchMembers(ctx, id, afterID, limit)
	if err != nil {
		return nil, b.wrap(ctx, err)
	}
	return rows, nil
}

// CheckID refuses a batch id that no batch can have.
func CheckID(id int64) error {
	if id <= 0 {
		return kerr.Invalid("batch id %d: ids are positive", id)
	}
	return nil
}

func (b *Book) wrap(ctx context.Context, err error) error {
	if b.Wrap == nil {
		return err
	}
	return b.Wrap(ctx, err)
}
