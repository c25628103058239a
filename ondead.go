package keel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/engine"
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

// OnDead names the type of the follow-up task enqueued when a task of the
// registered type is dead-lettered: its payload is a DeadTask. Only
// meaningful on Handle and Declare (the type's policy, stored with its
// declared defaults so that every process applies it). The follow-up type
// may not be the type itself nor one of keel's own. Default none.
func OnDead(followUpType string) Option { return func(o *options) { o.onDead = ptr(followUpType) } }

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

const (
	// onDeadType is keel's own type whose tasks run Config.OnDead.
	onDeadType = "keel.on_dead"
	// followUpMeta marks a follow-up task (its meta key), so that its own
	// death creates no further follow-up.
	followUpMeta = "keel.on_dead_of"
	// onDeadAttempts bounds how often the hook runs for one dead task.
	onDeadAttempts = 25
)

// followUpKey is the idempotency key of a dead task's follow-up of kind
// (a type name, or "hook"): one per death, even when the write repeats.
func followUpKey(kind string, id, fence int64) string {
	return "keel.on_dead:" + kind + ":" + strconv.FormatInt(id, 10) + ":" + strconv.FormatInt(fence, 10)
}

// isFollowUp reports whether a task's meta marks it as a follow-up.
func isFollowUp(meta []byte) bool {
	if len(meta) == 0 {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return false
	}
	_, ok := m[followUpMeta]
	return ok
}

// onDeadOf returns a type's on_dead follow-up type and whether its deaths
// run the hook: this client's own registration when it declares any
// default, else the type's stored declaration.
func (c *Client) onDeadOf(ctx context.Context, taskType string) (string, bool, error) {
	if o, ok := c.types[taskType]; ok && o.declared() {
		return deref(o.onDead), o.onDeadHook, nil
	}
	stored, err := c.storedDefaults(ctx, []string{taskType})
	if err != nil {
		return "", false, err
	}
	if s := stored[taskType]; s != nil {
		return s.OnDead, s.OnDeadHook, nil
	}
	return "", false, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// followUps builds the follow-up tasks of row, dead-lettered by t (see
// engine.Config.FollowUps).
func (c *Client) followUps(ctx context.Context, row *driver.TaskRow, t driver.Transition) ([]driver.InsertParams, error) {
	if reservedType(row.Type) {
		return nil, nil
	}
	onDead, hook, err := c.onDeadOf(ctx, row.Type)
	if err != nil {
		return nil, err
	}
	if onDead == "" && !hook {
		return nil, nil
	}
	payload, meta := row.Payload, row.Meta
	if payload == nil { // the rescuer's row: read the task
		full, err := c.drv.Get(ctx, row.ID)
		if err != nil {
			return nil, fmt.Errorf("read dead task %d: %w", row.ID, err)
		}
		payload, meta = full.Payload, full.Meta
	}
	if isFollowUp(meta) {
		// No chains: a follow-up's death runs the hook only.
		if onDead = ""; !hook {
			return nil, nil
		}
	}
	dead := DeadTask{TaskID: row.ID, Type: row.Type, Queue: row.Queue, Attempt: row.Attempt, Payload: payload}
	if t.Error != nil {
		dead.Error = t.Error.Error
	}
	raw, err := json.Marshal(dead)
	if err != nil {
		return nil, fmt.Errorf("encode dead task %d: %w", row.ID, err)
	}
	canon, err := digest.Canonical(raw)
	if err != nil {
		return nil, fmt.Errorf("encode dead task %d: %w", row.ID, err)
	}
	markMeta, _ := json.Marshal(map[string]string{followUpMeta: strconv.FormatInt(row.ID, 10)})
	now := c.cfg.Now()
	var out []driver.InsertParams
	if onDead != "" {
		p := driver.InsertParams{Queue: DefaultQueue, Type: onDead, Payload: canon, MaxAttempts: c.cfg.MaxAttempts,
			RunAt: now, Timeout: c.cfg.Timeout, Now: now, Meta: markMeta,
			IdemKey:       digest.ExplicitKey(followUpKey(onDead, row.ID, row.Fence)),
			PayloadDigest: digest.Sum(append([]byte(onDead+"\x00"), canon...))}
		o, known := c.types[onDead]
		if !known || !o.declared() {
			stored, err := c.storedDefaults(ctx, []string{onDead})
			if err != nil {
				return nil, err
			}
			o = storedOptions(stored[onDead])
		}
		if o.queue != nil {
			p.Queue = *o.queue
		}
		if o.priority != nil {
			p.Priority = *o.priority
		}
		if o.maxAttempts != nil {
			p.MaxAttempts = *o.maxAttempts
		}
		if o.timeout != nil {
			p.Timeout = *o.timeout
		}
		out = append(out, p)
	}
	if hook {
		out = append(out, driver.InsertParams{Queue: ReservedQueue, Type: onDeadType, Payload: canon,
			MaxAttempts: onDeadAttempts, RunAt: now, Timeout: c.cfg.Timeout, Now: now, Meta: markMeta,
			IdemKey:       digest.ExplicitKey(followUpKey("hook", row.ID, row.Fence)),
			PayloadDigest: digest.Sum(append([]byte(onDeadType+"\x00"), canon...))})
	}
	return out, nil
}

// onDeadHandler runs Config.OnDead for one keel.on_dead task: with the
// dead task as Get finds it now, or, when it is gone (purged), as the
// follow-up's payload describes it.
func (c *Client) onDeadHandler() engine.Handler {
	return func(ctx context.Context, row *driver.TaskRow) (json.RawMessage, error) {
		var dead DeadTask
		if err := json.Unmarshal(row.Payload, &dead); err != nil {
			return nil, Permanent(fmt.Errorf("on_dead payload: %w", err))
		}
		info, err := c.Get(ctx, dead.TaskID)
		switch {
		case errors.Is(err, ErrNotFound):
			info = &TaskInfo{ID: dead.TaskID, Type: dead.Type, Queue: dead.Queue, State: StateDead,
				Attempt: dead.Attempt, Payload: dead.Payload,
				Errors: []AttemptError{{Attempt: dead.Attempt, Error: dead.Error}}}
		case err != nil:
			return nil, err
		}
		return nil, c.cfg.OnDead(ctx, *info)
	}
}

// onDeadRetry is the hook's retry policy: from 1s, doubling, capped at 5m.
var onDeadRetry = struct{ base, max time.Duration }{time.Second, 5 * time.Minute}
