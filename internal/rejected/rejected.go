// Package rejected serves the Client's calls on the messages broker
// sources could not turn into tasks: it lists, reads and deletes them,
// checks a resubmission and records the task it became, and reads the
// sources' reports. The client turns its rows into the public types.
package rejected

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/sourcemap"
)

// Store is what the client's calls need of a driver (a part of
// driver.SourceStore).
type Store interface {
	ListRejected(ctx context.Context, f driver.RejectedFilter) ([]driver.RejectedRow, error)
	GetRejected(ctx context.Context, id int64) (*driver.RejectedRow, error)
	ResolveRejected(ctx context.Context, id, taskID int64, now time.Time) (bool, error)
	DeleteRejected(ctx context.Context, id int64) error
	ListSources(ctx context.Context) ([]driver.SourceRow, error)
}

// Book answers the calls through a driver.
type Book struct {
	store Store // nil when the driver stores no broker sources
	now   func() time.Time
}

// New returns the Book of drv (any driver: one that is no Store answers
// every call but Sources with driver.ErrWrongState). now stamps
// resubmissions.
func New(drv any, now func() time.Time) *Book {
	s, _ := drv.(Store)
	return &Book{store: s, now: now}
}

func (b *Book) sources() (Store, error) {
	if b.store == nil {
		return nil, fmt.Errorf("%w: the driver stores no broker sources", driver.ErrWrongState)
	}
	return b.store, nil
}

// Sources returns every source's latest report: nil when the driver
// stores no sources or on an error, else a list (empty when none
// reported).
func (b *Book) Sources(ctx context.Context) ([]driver.SourceRow, error) {
	if b.store == nil {
		return nil, nil
	}
	rows, err := b.store.ListSources(ctx)
	if err != nil {
		return nil, fmt.Errorf("keel: list sources: %w", driver.Unavailable(ctx, err, nil))
	}
	if rows == nil {
		rows = []driver.SourceRow{}
	}
	return rows, nil
}

// List returns the messages f selects, newest first. A Limit of 0 is
// 100; a bad filter is a kerr.ErrInvalid error.
func (b *Book) List(ctx context.Context, f driver.RejectedFilter) ([]driver.RejectedRow, error) {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 1 || f.Limit > 1000 {
		return nil, kerr.Invalid("limit %d out of 1..1000", f.Limit)
	}
	if f.Before < 0 {
		return nil, kerr.Invalid("before %d is negative", f.Before)
	}
	s, err := b.sources()
	if err != nil {
		return nil, err
	}
	rows, err := s.ListRejected(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("keel: list rejected messages: %w", driver.Unavailable(ctx, err, nil))
	}
	return rows, nil
}

// Get reads message id; an unknown id wraps driver.ErrNotFound.
func (b *Book) Get(ctx context.Context, id int64) (*driver.RejectedRow, error) {
	s, err := b.sources()
	if err != nil {
		return nil, err
	}
	r, err := s.GetRejected(ctx, id)
	if err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return nil, fmt.Errorf("%w: no rejected message %d", driver.ErrNotFound, id)
		}
		return nil, fmt.Errorf("keel: get rejected message: %w", driver.Unavailable(ctx, err, nil))
	}
	return r, nil
}

// Delete deletes message id; an unknown id wraps driver.ErrNotFound.
func (b *Book) Delete(ctx context.Context, id int64) error {
	s, err := b.sources()
	if err != nil {
		return err
	}
	if err := s.DeleteRejected(ctx, id); err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return fmt.Errorf("%w: no rejected message %d", driver.ErrNotFound, id)
		}
		return fmt.Errorf("keel: delete rejected message: %w", driver.Unavailable(ctx, err, nil))
	}
	return nil
}

// Task is the task a rejected message becomes: of the source's type and
// queue ("" for the type's default), unique by Key.
type Task struct {
	Type, Queue, Key string
	Payload          json.RawMessage
	// Done is the task the message already became; 0 while it did not.
	Done int64
}

// Resubmission reads message id and returns the task it becomes, with
// payload (nil: the stored body) and key (empty: read with the source's
// key spec). A message that still cannot become a task is a
// kerr.ErrInvalid error with the reason.
func (b *Book) Resubmission(ctx context.Context, id int64, payload json.RawMessage, key string) (*Task, error) {
	m, err := b.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.TaskID != 0 {
		return &Task{Done: m.TaskID}, nil
	}
	body := m.Body
	if payload != nil {
		body = payload
	}
	if int64(len(m.Body)) < m.Size && payload == nil {
		return nil, kerr.Invalid("rejected message %d: only %d of its %d bytes were stored; resubmit it with a payload", id, len(m.Body), m.Size)
	}
	if key == "" {
		if key, err = sourcemap.Message(m.Key, body, len(body), sourcemap.Headers(Headers(m), "")); err != nil {
			return nil, kerr.Invalid("rejected message %d: %s", id, sourcemap.Reason(err))
		}
	} else if !json.Valid(body) {
		return nil, kerr.Invalid("rejected message %d: the payload is not JSON", id)
	}
	return &Task{Type: m.Type, Queue: m.Queue, Key: key, Payload: body}, nil
}

// Resolved records that message id became task taskID. The task exists
// by then; when this write fails, a second resubmission finds the same
// task through its key and records it then.
func (b *Book) Resolved(ctx context.Context, id, taskID int64) error {
	s, err := b.sources()
	if err != nil {
		return err
	}
	if _, err := s.ResolveRejected(ctx, id, taskID, b.now()); err != nil {
		return fmt.Errorf("keel: resubmit rejected message %d: task %d enqueued, not recorded: %w", id, taskID, driver.Unavailable(ctx, err, nil))
	}
	return nil
}

// Headers decodes a message's stored headers (written by package source
// as a JSON object); nil when it has none.
func Headers(r *driver.RejectedRow) map[string][]string {
	var h map[string][]string
	if len(r.Headers) > 0 {
		_ = json.Unmarshal(r.Headers, &h)
	}
	return h
}
