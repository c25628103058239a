package driver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Broker sources (package keel/source) consume RabbitMQ or NATS JetStream
// messages into tasks. What they cannot turn into a task is kept, never
// dropped, in keel_rejected; what they count is reported, per source and
// node, into keel_sources.

// RejectedParams is one message a source could not turn into a task.
type RejectedParams struct {
	Source string // the source's name, 1..200 bytes
	Type   string // the task type the source maps messages to
	Queue  string // the task queue it enqueues into ("" for the type's default)
	Key    string // the source's key spec: a JSON pointer or "header:NAME"
	Reason string // why, for an operator: "body is not JSON: …"
	// Body is the message's raw body, at most MaxRejectedBody bytes: a
	// longer one is cut there, and Size tells its whole length.
	Body []byte
	Size int64
	// Headers is a JSON object of header name to its values (strings);
	// empty is stored as "{}".
	Headers []byte
	// Digest is the SHA-256 of the whole body: a second message of Source
	// with the same digest (a redelivery) is not stored again.
	Digest     []byte
	ReceivedAt time.Time
}

// The limits of what a SourceStore stores (one column size on every
// database): MaxRejectedBody is how much of a rejected message's body is
// kept (8 MiB, under MariaDB's default 16 MiB max_allowed_packet, with
// its headers); MaxRejectedReason and MaxSourceError bound a reason and
// a report's last error (MySQL TEXT), MaxRejectedHeaders the headers.
const (
	MaxRejectedBody    = 8 << 20
	MaxRejectedHeaders = 1 << 20
	MaxRejectedReason  = 4000
	MaxSourceError     = 4000
)

// Validate rejects params no driver stores: Source and Type 1..200 bytes,
// Queue at most 200 and Key at most 1000, a Reason (at most
// MaxRejectedReason bytes), Headers at most MaxRejectedHeaders, a Body over
// MaxRejectedBody or Size below it, a Digest not 32 bytes, no ReceivedAt
// or one outside the years 1000..9999. The text fields (all but Body and
// Digest) must be valid UTF-8 without NUL: PostgreSQL and MySQL refuse
// such text, and SQLite must not keep what they refuse.
func (p RejectedParams) Validate() error {
	switch {
	case p.Source == "" || len(p.Source) > 200:
		return fmt.Errorf("rejected message: source must be 1..200 bytes, got %d", len(p.Source))
	case p.Type == "" || len(p.Type) > 200:
		return fmt.Errorf("rejected message: type must be 1..200 bytes, got %d", len(p.Type))
	case len(p.Queue) > 200 || len(p.Key) > 1000:
		return fmt.Errorf("rejected message: queue (%d bytes, at most 200) or key (%d bytes, at most 1000) too long", len(p.Queue), len(p.Key))
	case p.Reason == "":
		return fmt.Errorf("rejected message: no reason")
	case len(p.Body) > MaxRejectedBody:
		return fmt.Errorf("rejected message: body of %d bytes over %d", len(p.Body), MaxRejectedBody)
	case p.Size < int64(len(p.Body)):
		return fmt.Errorf("rejected message: size %d below the body's %d bytes", p.Size, len(p.Body))
	case len(p.Digest) != 32:
		return fmt.Errorf("rejected message: digest must be 32 bytes, got %d", len(p.Digest))
	case p.ReceivedAt.IsZero():
		return fmt.Errorf("rejected message: no receive time")
	}
	err := errors.Join(
		checkText("source", p.Source, 200, true),
		checkText("type", p.Type, 200, true),
		checkText("queue", p.Queue, 200, false),
		checkText("key", p.Key, 1000, false),
		checkText("reason", p.Reason, MaxRejectedReason, true),
		checkText("headers", string(p.Headers), MaxRejectedHeaders, false),
		checkYear("receive time", p.ReceivedAt),
	)
	if err != nil {
		return fmt.Errorf("rejected message: %w", err)
	}
	return nil
}

// checkYear rejects a time outside the years 1000..9999, which MySQL's
// DATETIME cannot hold.
func checkYear(what string, t time.Time) error {
	if y := t.UTC().Year(); y < 1000 || y > 9999 {
		return fmt.Errorf("%s %s outside the years 1000..9999", what, t.UTC().Format(time.RFC3339))
	}
	return nil
}

// RejectedResult is what InsertRejected did with one message: ID is its
// row, Duplicate says the row was already there (same source and digest).
type RejectedResult struct {
	ID        int64
	Duplicate bool
}

// RejectedRow is a stored rejected message.
type RejectedRow struct {
	ID         int64
	Source     string
	Type       string
	Queue      string
	Key        string
	Reason     string
	Body       []byte
	Size       int64
	Headers    []byte // JSON object, as stored
	ReceivedAt time.Time
	// ResubmittedAt and TaskID are set once the message became a task
	// (ResolveRejected); zero before.
	ResubmittedAt time.Time
	TaskID        int64
}

// RejectedFilter selects rejected messages, newest first.
type RejectedFilter struct {
	Source string // "" for every source
	// Open keeps only the messages not resubmitted yet.
	Open bool
	// Before keeps only ids below it (0: from the newest), for paging.
	Before int64
	Limit  int // 1..1000
}

// Validate rejects a filter no driver runs: Limit outside 1..1000, a
// negative Before.
func (f RejectedFilter) Validate() error {
	if f.Limit < 1 || f.Limit > 1000 {
		return fmt.Errorf("list rejected messages: limit must be in 1..1000, got %d", f.Limit)
	}
	if f.Before < 0 {
		return fmt.Errorf("list rejected messages: before must not be negative, got %d", f.Before)
	}
	return nil
}

// SourceReport is what one source on one node counted since it started,
// written every few seconds (an upsert on Source and Node).
type SourceReport struct {
	Source string
	Node   string
	Kind   string // "rabbitmq" or "nats"
	Type   string
	// State is "running", "paused" (its queue or type is paused),
	// "backlog" (its type's backlog is over the bound), "waiting" (the
	// database is unavailable: messages are nacked), "connecting" (the
	// broker cannot be reached) or "stopped".
	State     string
	LastError string // the latest error, "" when none
	Accepted  int64  // messages that became a new task
	Duplicate int64  // messages whose task already existed
	Rejected  int64  // messages stored in keel_rejected
	Nacked    int64  // messages negatively acknowledged for redelivery
	// AckP50 and AckP99 are the median and 99th percentile of the time
	// from a message's arrival to its ack, over the latest acks.
	AckP50, AckP99 time.Duration
	StartedAt      time.Time
	Now            time.Time
}

// Validate rejects a report no driver stores: Source, Node and Type
// 1..200 bytes, Kind and State 1..16, LastError at most MaxSourceError
// bytes (a reporter cuts a longer one), all valid UTF-8 without NUL;
// negative counters or durations; no StartedAt or Now, or one outside the
// years 1000..9999.
func (r SourceReport) Validate() error {
	err := errors.Join(
		checkText("source", r.Source, 200, true),
		checkText("node", r.Node, 200, true),
		checkText("kind", r.Kind, 16, true),
		checkText("type", r.Type, 200, true),
		checkText("state", r.State, 16, true),
		checkText("last error", r.LastError, MaxSourceError, false),
	)
	switch {
	case err != nil:
	case r.Accepted < 0 || r.Duplicate < 0 || r.Rejected < 0 || r.Nacked < 0:
		err = fmt.Errorf("counters must not be negative: accepted %d, duplicate %d, rejected %d, nacked %d",
			r.Accepted, r.Duplicate, r.Rejected, r.Nacked)
	case r.AckP50 < 0 || r.AckP99 < 0:
		err = fmt.Errorf("ack times must not be negative: p50 %v, p99 %v", r.AckP50, r.AckP99)
	case r.StartedAt.IsZero() || r.Now.IsZero():
		err = fmt.Errorf("start time and now are required")
	default:
		err = errors.Join(checkYear("start time", r.StartedAt), checkYear("now", r.Now))
	}
	if err != nil {
		return fmt.Errorf("source report: %w", err)
	}
	return nil
}

// SourceRow is the stored report of one source on one node.
type SourceRow struct {
	SourceReport
	UpdatedAt time.Time
}

// SourceStore is implemented by drivers that keep the broker sources'
// reports and rejected messages (every keel driver). Package keel/source
// and the Client discover it with a type assertion, so the Driver
// interface does not grow.
type SourceStore interface {
	// InsertRejected stores messages in one transaction, its results in
	// the order of params. A message whose Source and Digest are already
	// stored (or given earlier in params) is not stored again: its result
	// names the existing row with Duplicate set, also when concurrent
	// calls store the same message. Params that fail Validate write
	// nothing; empty Headers are stored as "{}".
	InsertRejected(ctx context.Context, params []RejectedParams) ([]RejectedResult, error)
	// ListRejected reads the messages f selects, newest (highest id)
	// first; a filter that fails Validate is an error.
	ListRejected(ctx context.Context, f RejectedFilter) ([]RejectedRow, error)
	// GetRejected reads one message or returns ErrNotFound.
	GetRejected(ctx context.Context, id int64) (*RejectedRow, error)
	// ResolveRejected records that message id became task taskID at now
	// (true), unless it already had (false: the first record stays). An
	// unknown id is ErrNotFound.
	ResolveRejected(ctx context.Context, id, taskID int64, now time.Time) (bool, error)
	// DeleteRejected deletes message id; an unknown id is ErrNotFound.
	DeleteRejected(ctx context.Context, id int64) error
	// ReportSource upserts the report of r.Source on r.Node, every field
	// replaced, UpdatedAt set to r.Now; a report that fails Validate is an
	// error.
	ReportSource(ctx context.Context, r SourceReport) error
	// ListSources reads every stored report, by source then node.
	ListSources(ctx context.Context) ([]SourceRow, error)
}
