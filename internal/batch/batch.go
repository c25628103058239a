// Package batch finishes batches: groups of tasks whose callbacks are
// enqueued when every member has finished. Nothing counts the members as
// they finish, so no row is updated by every member's transition: the
// leader's Finisher looks, every Interval, at each sealed batch not
// finished yet, and the driver finishes one whose members have all
// reached a final state, enqueuing its callbacks in the same transaction
// (driver.Batcher.FinishBatch). Its callbacks carry an idempotency key of
// their own, and the driver locks the batch's row while it finishes it, so
// each is enqueued once.
package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/digest"
)

// The kinds of callback.
const (
	// OnSuccess is enqueued when every member succeeded.
	OnSuccess = "on_success"
	// OnFinish is enqueued when every member reached a final state
	// (succeeded, dead or cancelled).
	OnFinish = "on_finish"
)

// Callback is a callback as the batch stores it: the task to enqueue,
// prepared and checked when the batch was created, with the caller's
// payload.
type Callback struct {
	Queue       string          `json:"queue"`
	Type        string          `json:"type"`
	Priority    int             `json:"priority,omitempty"`
	Payload     json.RawMessage `json:"payload"`
	MaxAttempts int             `json:"max_attempts"`
	TimeoutMS   int64           `json:"timeout_ms"`
	Meta        json.RawMessage `json:"meta,omitempty"`
}

// Encode is the stored document of a callback prepared as p (nil: none).
func Encode(p *driver.InsertParams) ([]byte, error) {
	if p == nil {
		return nil, nil
	}
	return json.Marshal(Callback{Queue: p.Queue, Type: p.Type, Priority: p.Priority, Payload: p.Payload,
		MaxAttempts: p.MaxAttempts, TimeoutMS: p.Timeout.Milliseconds(), Meta: p.Meta})
}

// Event is the payload of a callback task: the batch, its members' final
// counts and the payload the caller gave the callback (Data).
type Event struct {
	BatchID   int64           `json:"batch_id"`
	Kind      string          `json:"kind"`
	Total     int64           `json:"total"`
	Succeeded int64           `json:"succeeded"`
	Dead      int64           `json:"dead"`
	Cancelled int64           `json:"cancelled"`
	Data      json.RawMessage `json:"data"`
}

// Key is the idempotency key of batch id's callback of kind: its own
// namespace, apart from callers' keys.
func Key(id int64, kind string) string { return "b:" + strconv.FormatInt(id, 10) + ":" + kind }

// Build is the task to enqueue for the stored callback doc of kind when
// batch b finishes with counts c, at now.
func Build(kind string, doc []byte, b *driver.BatchRow, c driver.BatchCounts, now time.Time) (*driver.InsertParams, error) {
	var cb Callback
	if err := json.Unmarshal(doc, &cb); err != nil {
		return nil, fmt.Errorf("batch %d: read %s callback: %w", b.ID, kind, err)
	}
	data := cb.Payload
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	ev, err := json.Marshal(Event{BatchID: b.ID, Kind: kind, Total: b.Total, Succeeded: c.Succeeded, Dead: c.Dead,
		Cancelled: c.Cancelled, Data: data})
	if err != nil {
		return nil, fmt.Errorf("batch %d: %s payload: %w", b.ID, kind, err)
	}
	canon, err := digest.Canonical(ev)
	if err != nil {
		return nil, fmt.Errorf("batch %d: %s payload: %w", b.ID, kind, err)
	}
	return &driver.InsertParams{Queue: cb.Queue, Type: cb.Type, Priority: cb.Priority, Payload: canon,
		MaxAttempts: cb.MaxAttempts, RunAt: now, Timeout: time.Duration(cb.TimeoutMS) * time.Millisecond,
		IdemKey: Key(b.ID, kind), PayloadDigest: digest.Sum(append([]byte(cb.Type+"\x00"), canon...)),
		Meta: cb.Meta, Now: now}, nil
}

// Callbacks are the tasks a batch's finish enqueues at now: on_success
// when every member succeeded (none dead or cancelled), on_finish always;
// each only when the batch has one.
func Callbacks(b *driver.BatchRow, c driver.BatchCounts, now time.Time) (onSuccess, onFinish *driver.InsertParams, err error) {
	if b.OnSuccess != nil && c.Dead == 0 && c.Cancelled == 0 {
		if onSuccess, err = Build(OnSuccess, b.OnSuccess, b, c, now); err != nil {
			return nil, nil, err
		}
	}
	if b.OnFinish != nil {
		if onFinish, err = Build(OnFinish, b.OnFinish, b, c, now); err != nil {
			return nil, nil, err
		}
	}
	return onSuccess, onFinish, nil
}

// prune deletes the batches past retention, PerPass at a time, once every
// PruneEvery.
func (f *Finisher) prune(ctx context.Context) error {
	now := f.cfg.Now()
	if f.cfg.Retention <= 0 || now.Sub(f.pruned) < PruneEvery {
		return nil
	}
	for {
		n, err := f.cfg.Store.PruneBatches(ctx, now.Add(-f.cfg.Retention), PerPass)
		if err != nil {
			return err
		}
		if n > 0 {
			f.cfg.Logger.Info("keel: finished batches past retention deleted", "batches", n)
		}
		if n < PerPass {
			break
		}
	}
	f.pruned = now
	return nil
}

// Succeeded reports whether a finished batch's members all succeeded.
func Succeeded(b *driver.BatchRow) bool { return b.Dead == 0 && b.Cancelled == 0 }

// Store is what a Finisher needs of a driver.
type Store interface {
	UnfinishedBatches(ctx context.Context, limit int) ([]int64, error)
	FinishBatch(ctx context.Context, params driver.FinishBatchParams) (*driver.BatchRow, bool, error)
	PruneBatches(ctx context.Context, before time.Time, limit int) (int64, error)
}

// PerPass is the most batches one pass looks at; the rest wait for the
// next.
const PerPass = 1000

// Config wires a Finisher.
type Config struct {
	Store  Store
	Now    func() time.Time
	Logger *slog.Logger
	// Leading gates the passes: only the elected leader runs them. Nil:
	// always.
	Leading func() bool
	// Finished is told of every batch a pass finished (metrics, logs);
	// nil: no one.
	Finished func(b *driver.BatchRow)
	// Retention is how long a finished batch is kept; 0 keeps it for ever.
	// Batches past it are deleted once every PruneEvery.
	Retention time.Duration
}

// Retention is how long a finished batch is kept: while its members could
// still be read, archived and then deleted (the longer of retainSucceeded
// and retainDead, plus deleteArchivedAfter); for ever (0) when archived
// tasks are kept for ever (deleteArchivedAfter 0).
func Retention(retainSucceeded, retainDead, deleteArchivedAfter time.Duration) time.Duration {
	if deleteArchivedAfter <= 0 {
		return 0
	}
	return max(retainSucceeded, retainDead) + deleteArchivedAfter
}

// Interval is how often the leader runs a Finisher's pass.
const Interval = time.Second

// PruneEvery is how often a Finisher deletes the batches past retention.
const PruneEvery = time.Minute

// Finisher finishes the batches whose members have all finished.
type Finisher struct {
	cfg    Config
	pruned time.Time // the last prune
}

// New returns a Finisher.
func New(cfg Config) *Finisher {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Finisher{cfg: cfg}
}

// Run is one pass as an engine loop runs it: while leading, errors logged.
func (f *Finisher) Run(ctx context.Context) {
	if f.cfg.Leading != nil && !f.cfg.Leading() {
		return
	}
	if err := f.RunOnce(ctx); err != nil && ctx.Err() == nil {
		f.cfg.Logger.Warn("keel: finishing batches failed; next try in one interval", "error", err)
	}
}

// RunOnce looks at up to PerPass unfinished batches and finishes those
// whose members have all finished; it stops at the first error.
func (f *Finisher) RunOnce(ctx context.Context) error {
	if err := f.prune(ctx); err != nil {
		return err
	}
	ids, err := f.cfg.Store.UnfinishedBatches(ctx, PerPass)
	if err != nil {
		return err
	}
	for _, id := range ids {
		b, done, err := f.cfg.Store.FinishBatch(ctx, driver.FinishBatchParams{ID: id, Now: f.cfg.Now, Callbacks: Callbacks})
		if err != nil {
			return err
		}
		if !done {
			continue
		}
		f.cfg.Logger.Info("keel: batch finished", "batch", b.ID, "total", b.Total, "succeeded", b.Succeeded,
			"dead", b.Dead, "cancelled", b.Cancelled, "on_success", b.OnSuccessID, "on_finish", b.OnFinishID)
		if f.cfg.Finished != nil {
			f.cfg.Finished(b)
		}
	}
	return nil
}
