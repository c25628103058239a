package keel

import (
	"context"
	"encoding/json"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/conv"
	"github.com/keelq/keel/internal/rejected"
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

// rejected answers the calls on sources and rejected messages.
func (c *Client) rejected() *rejected.Book { return rejected.New(c.drv, c.cfg.Now) }

// Sources returns every source's latest report, by name then node. A
// source whose process stopped keeps its last report (state "stopped",
// or an old UpdatedAt when it was killed) while its node is registered;
// once neither the report nor the node's heartbeat is younger than three
// lease TTLs, the leader deletes it with the node.
func (c *Client) Sources(ctx context.Context) ([]SourceInfo, error) {
	rows, err := c.rejected().Sources(ctx)
	if rows == nil {
		return nil, err
	}
	return conv.Slice(rows, func(r driver.SourceRow) SourceInfo {
		return SourceInfo{Name: r.Source, Node: r.Node, Kind: r.Kind, Type: r.Type, State: r.State, LastError: r.LastError,
			Accepted: r.Accepted, Duplicate: r.Duplicate, Rejected: r.Rejected, Nacked: r.Nacked,
			AckP50: r.AckP50, AckP99: r.AckP99, StartedAt: r.StartedAt, UpdatedAt: r.UpdatedAt}
	}), nil
}

// Rejected lists rejected messages, newest first. Bad filters are
// ErrInvalid.
func (c *Client) Rejected(ctx context.Context, f RejectedFilter) ([]*RejectedMessage, error) {
	rows, err := c.rejected().List(ctx, driver.RejectedFilter{Source: f.Source, Open: f.Open, Before: f.Before, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	return conv.Rows(rows, rejectedFromRow), nil
}

// GetRejected reads one rejected message; an unknown id is ErrNotFound.
func (c *Client) GetRejected(ctx context.Context, id int64) (*RejectedMessage, error) {
	r, err := c.rejected().Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return rejectedFromRow(r), nil
}

// ResubmitRejected turns a rejected message into a task of its source's
// type and queue, with UniqueBy its natural key, and records the task on
// the message. A message resubmitted before returns its task again with
// Duplicate set. A message that still cannot become a task is ErrInvalid
// with the reason, and nothing is written.
func (c *Client) ResubmitRejected(ctx context.Context, id int64, r Resubmit) (*TaskInfo, error) {
	task, err := c.rejected().Resubmission(ctx, id, r.Payload, r.Key)
	if err != nil {
		return nil, err
	}
	if task.Done != 0 {
		t, err := c.Get(ctx, task.Done)
		if err != nil {
			return nil, err
		}
		t.Duplicate = true
		return t, nil
	}
	opts := []Option{UniqueBy(task.Key)}
	if task.Queue != "" {
		opts = append(opts, Queue(task.Queue))
	}
	t, err := c.Enqueue(ctx, task.Type, task.Payload, opts...)
	if err != nil {
		return nil, err
	}
	if err := c.rejected().Resolved(ctx, id, t.ID); err != nil {
		return nil, err
	}
	return t, nil
}

// DeleteRejected deletes a rejected message for good; an unknown id is
// ErrNotFound.
func (c *Client) DeleteRejected(ctx context.Context, id int64) error {
	return c.rejected().Delete(ctx, id)
}

func rejectedFromRow(r *driver.RejectedRow) *RejectedMessage {
	return &RejectedMessage{ID: r.ID, Source: r.Source, Type: r.Type, Queue: r.Queue, Key: r.Key, Reason: r.Reason, Body: r.Body,
		Size: r.Size, Headers: rejected.Headers(r), ReceivedAt: r.ReceivedAt, ResubmittedAt: r.ResubmittedAt, TaskID: r.TaskID}
}
