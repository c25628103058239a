package keel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/sourcemap"
)

// Broker sources (package keel/source) turn RabbitMQ and NATS JetStream
// messages into tasks. A message that cannot become one (not JSON, no
// key, too large) is kept as a RejectedMessage until an operator
// resubmits or deletes it; each source reports its counters, read back
// with Client.Sources.

// RejectedMessage is a message a source could not turn into a task.
type RejectedMessage struct {
	ID     int64
	Source string // the source's name
	Type   string // the task type its messages become
	Queue  string // the task queue ("" for the type's default)
	Key    string // the source's key spec: a JSON pointer or "header:NAME"
	Reason string // why it was rejected
	// Body is the raw body, cut at 8 MiB; Size is its whole length.
	Body []byte
	Size int64
	// Headers are the message's headers, each value as a string.
	Headers    map[string][]string
	ReceivedAt time.Time
	// ResubmittedAt and TaskID tell when and as which task it was
	// resubmitted; zero while it is not.
	ResubmittedAt time.Time
	TaskID        int64
}

// RejectedFilter selects rejected messages, newest first.
type RejectedFilter struct {
	Source string // "" for every source
	Open   bool   // only those not resubmitted yet
	Before int64  // only ids below it, for paging (0: from the newest)
	Limit  int    // 1..1000; default 100
}

// Resubmit changes a rejected message before it becomes a task; the zero
// value resubmits it as it is (useful once the reason is gone, such as a
// raised size limit).
type Resubmit struct {
	// Payload replaces the body (it must be JSON). Default: the stored
	// body.
	Payload json.RawMessage
	// Key is the natural key. Default: read from the payload or the
	// stored headers with the source's key spec.
	Key string
}

// SourceInfo is what one source on one node last reported.
type SourceInfo struct {
	Name string
	Node string
	Kind string // "rabbitmq" or "nats"
	Type string // the task type its messages become
	// State is "running", "paused", "backlog", "waiting", "connecting" or
	// "stopped" (see driver.SourceReport).
	State     string
	LastError string
	// Counters since the source started on that node.
	Accepted, Duplicate, Rejected, Nacked int64
	// AckP50 and AckP99: time from a message's arrival to its ack.
	AckP50, AckP99 time.Duration
	StartedAt      time.Time
	UpdatedAt      time.Time
}

func (c *Client) sourceStore() (driver.SourceStore, error) {
	s, ok := c.drv.(driver.SourceStore)
	if !ok {
		return nil, fmt.Errorf("%w: the driver stores no broker sources", ErrWrongState)
	}
	return s, nil
}

// Sources returns every source's latest report, by name then node. A
// source whose process stopped keeps its last report (state "stopped",
// or an old UpdatedAt when it was killed) while its node is registered;
// once neither the report nor the node's heartbeat is younger than three
// lease TTLs, the leader deletes it with the node.
func (c *Client) Sources(ctx context.Context) ([]SourceInfo, error) {
	s, ok := c.drv.(driver.SourceStore)
	if !ok {
		return nil, nil
	}
	rows, err := s.ListSources(ctx)
	if err != nil {
		return nil, fmt.Errorf("keel: list sources: %w", unavailable(ctx, err))
	}
	out := make([]SourceInfo, len(rows))
	for i, r := range rows {
		out[i] = SourceInfo{Name: r.Source, Node: r.Node, Kind: r.Kind, Type: r.Type, State: r.State, LastError: r.LastError,
			Accepted: r.Accepted, Duplicate: r.Duplicate, Rejected: r.Rejected, Nacked: r.Nacked,
			AckP50: r.AckP50, AckP99: r.AckP99, StartedAt: r.StartedAt, UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}

// Rejected lists rejected messages, newest first. Bad filters are
// ErrInvalid.
func (c *Client) Rejected(ctx context.Context, f RejectedFilter) ([]*RejectedMessage, error) {
	if f.Limit == 0 {
		f.Limit = 100
	}
	if f.Limit < 1 || f.Limit > 1000 {
		return nil, invalid("limit %d out of 1..1000", f.Limit)
	}
	if f.Before < 0 {
		return nil, invalid("before %d is negative", f.Before)
	}
	s, err := c.sourceStore()
	if err != nil {
		return nil, err
	}
	rows, err := s.ListRejected(ctx, driver.RejectedFilter{Source: f.Source, Open: f.Open, Before: f.Before, Limit: f.Limit})
	if err != nil {
		return nil, fmt.Errorf("keel: list rejected messages: %w", unavailable(ctx, err))
	}
	out := make([]*RejectedMessage, len(rows))
	for i := range rows {
		out[i] = rejectedFromRow(&rows[i])
	}
	return out, nil
}

// GetRejected reads one rejected message; an unknown id is ErrNotFound.
func (c *Client) GetRejected(ctx context.Context, id int64) (*RejectedMessage, error) {
	s, err := c.sourceStore()
	if err != nil {
		return nil, err
	}
	r, err := s.GetRejected(ctx, id)
	if err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return nil, fmt.Errorf("%w: no rejected message %d", ErrNotFound, id)
		}
		return nil, fmt.Errorf("keel: get rejected message: %w", unavailable(ctx, err))
	}
	return rejectedFromRow(r), nil
}

// ResubmitRejected turns a rejected message into a task of its source's
// type and queue, with UniqueBy its natural key, and records the task on
// the message. A message resubmitted before returns its task again with
// Duplicate set. A message that still cannot become a task is ErrInvalid
// with the reason, and nothing is written.
func (c *Client) ResubmitRejected(ctx context.Context, id int64, r Resubmit) (*TaskInfo, error) {
	m, err := c.GetRejected(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.TaskID != 0 {
		t, err := c.Get(ctx, m.TaskID)
		if err != nil {
			return nil, err
		}
		t.Duplicate = true
		return t, nil
	}
	body := m.Body
	if r.Payload != nil {
		body = r.Payload
	}
	if int64(len(m.Body)) < m.Size && r.Payload == nil {
		return nil, invalid("rejected message %d: only %d of its %d bytes were stored; resubmit it with a payload", id, len(m.Body), m.Size)
	}
	key := r.Key
	if key == "" {
		if key, err = sourcemap.Message(m.Key, body, len(body), sourcemap.Headers(m.Headers, "")); err != nil {
			return nil, invalid("rejected message %d: %s", id, sourcemap.Reason(err))
		}
	} else if !json.Valid(body) {
		return nil, invalid("rejected message %d: the payload is not JSON", id)
	}
	opts := []Option{UniqueBy(key)}
	if m.Queue != "" {
		opts = append(opts, Queue(m.Queue))
	}
	t, err := c.Enqueue(ctx, m.Type, json.RawMessage(body), opts...)
	if err != nil {
		return nil, err
	}
	s, err := c.sourceStore()
	if err != nil {
		return nil, err
	}
	// The task exists now; when this write fails, a second resubmit finds
	// the same task through its key and records it then.
	if _, err := s.ResolveRejected(ctx, id, t.ID, c.cfg.Now()); err != nil {
		return nil, fmt.Errorf("keel: resubmit rejected message %d: task %d enqueued, not recorded: %w", id, t.ID, unavailable(ctx, err))
	}
	return t, nil
}

// DeleteRejected deletes a rejected message for good; an unknown id is
// ErrNotFound.
func (c *Client) DeleteRejected(ctx context.Context, id int64) error {
	s, err := c.sourceStore()
	if err != nil {
		return err
	}
	if err := s.DeleteRejected(ctx, id); err != nil {
		if errors.Is(err, driver.ErrNotFound) {
			return fmt.Errorf("%w: no rejected message %d", ErrNotFound, id)
		}
		return fmt.Errorf("keel: delete rejected message: %w", unavailable(ctx, err))
	}
	return nil
}

func rejectedFromRow(r *driver.RejectedRow) *RejectedMessage {
	m := &RejectedMessage{ID: r.ID, Source: r.Source, Type: r.Type, Queue: r.Queue, Key: r.Key, Reason: r.Reason,
		Body: r.Body, Size: r.Size, ReceivedAt: r.ReceivedAt, ResubmittedAt: r.ResubmittedAt, TaskID: r.TaskID}
	if len(r.Headers) > 0 {
		_ = json.Unmarshal(r.Headers, &m.Headers) // written by package source as a JSON object
	}
	return m
}
