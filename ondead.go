package keel

import (
	"context"
	"encoding/json"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/ondead"
)

// Fallbacks when a task dies (seed 000 §3.2: never swallow a failure).
//
// A type registered with OnDead("x.failed") gets, whenever one of its
// tasks is dead-lettered (retries used up, a permanent error, a snooze
// past its maximum, or a lease lost on the last attempt), one follow-up
// task of type "x.failed" carrying a DeadTask payload. The follow-up is
// inserted in the same transaction as the dead-lettering, by whichever
// process writes it (the worker's completion or the leader's rescuer), so
// it exists exactly once per death: the write is fenced, and the
// follow-up's idempotency key (keel.on_dead:<follow-up type>:<dead task id>:<fence>) dedupes a
// repeated write.
//
// Config.OnDead is a hook run for every dead task of the types this
// client handles. It is durable too: each death enqueues, in the same
// transaction, a task of keel's own type "keel.on_dead" in the reserved
// queue, whose handler (in a client with the hook) calls the hook; an
// error or a crash runs it again.
//
// A follow-up task that dies gets no on_dead follow-up of its own (no
// chains, so no loops; the hook still runs for it when its type is
// handled by a client with the hook), and keel's own types never get one.
//
// internal/ondead builds the follow-ups and runs the keel.on_dead tasks.

// OnDead names the type of the follow-up task enqueued when a task of the
// registered type is dead-lettered: its payload is a DeadTask. Only
// meaningful on Handle and Declare (the type's policy, stored with its
// declared defaults so that every process applies it). The follow-up type
// may not be the type itself nor one of keel's own. Default none.
func OnDead(followUpType string) Option {
	return func(o *options) { o.OnDead = enqueue.Ptr(followUpType) }
}

// DeadTask is the payload of an on_dead follow-up task: the dead task's
// id, type, queue, attempt and last error, and its payload as enqueued.
type DeadTask struct {
	TaskID  int64           `json:"task_id"`
	Type    string          `json:"type"`
	Queue   string          `json:"queue"`
	Attempt int             `json:"attempt"`
	Error   string          `json:"error"`
	Payload json.RawMessage `json:"payload"`
}

// The follow-up's payload is a DeadTask: ondead.Payload encodes as one.
var _ = DeadTask(ondead.Payload{})

// declaration returns the declaration that applies to taskType: this
// client's registration when it declares any default, else the stored one
// (nil: none). It says what a task's death enqueues (see internal/ondead).
func (c *Client) declaration(ctx context.Context, taskType string) (*driver.TypeDefaults, error) {
	return c.prep.Declaration(ctx, c.decl.Stored, taskType)
}
