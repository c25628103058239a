// Package ondead builds what a task's death enqueues, in the same
// transaction as the dead-lettering: its type's on_dead follow-up task and
// the keel.on_dead task that runs the client's OnDead hook. It also runs
// that keel.on_dead task.
//
// Each death enqueues its follow-ups exactly once: the dead-lettering
// write is fenced, and every follow-up carries an idempotency key made of
// the dead task's id and fence, which dedupes a repeated write. A
// follow-up's own death enqueues no follow-up (no chains, so no loops),
// though it still runs the hook; keel's own types never get one.
package ondead

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/outcome"
)

// Type is keel's own task type whose tasks run the OnDead hook.
const Type = "keel.on_dead"

const (
	// metaKey marks a follow-up task (its meta key, the dead task's id as
	// value), so that its own death creates no further follow-up.
	metaKey = "keel.on_dead_of"
	// hookAttempts bounds how often the hook runs for one dead task.
	hookAttempts = 25
)

// Backoff is the retry policy of Type's tasks: from 1s, doubling, capped
// at 5m.
var Backoff = backoff.Policy{Base: time.Second, Max: 5 * time.Minute, Jitter: 0.2}

// Payload is what every follow-up carries: the dead task's id, type,
// queue, attempt and last error, and its payload as enqueued. It encodes
// as the user's keel.DeadTask does.
type Payload struct {
	TaskID  int64           `json:"task_id"`
	Type    string          `json:"type"`
	Queue   string          `json:"queue"`
	Attempt int             `json:"attempt"`
	Error   string          `json:"error"`
	Payload json.RawMessage `json:"payload"`
}

// Store is what follow-ups need of a driver: a dead task as stored (the
// rescuer's rows lack the payload; the hook reads the task anew).
type Store interface {
	Get(ctx context.Context, id int64) (*driver.TaskRow, error)
}

// Config wires a Fallback.
type Config struct {
	Driver Store
	Now    func() time.Time
	// Declaration returns the declaration that applies to a task type:
	// the client's own registration when it declares any default, else
	// the stored one; nil when there is none. It says a type's on_dead
	// type, whether its deaths run the hook, and a follow-up type's
	// queue, priority, max attempts and timeout.
	Declaration func(ctx context.Context, taskType string) (*driver.TypeDefaults, error)
	// Reserved reports whether a type is keel's own: none gets follow-ups.
	Reserved func(taskType string) bool
	// Queue is the queue of follow-ups whose type declares none; HookQueue
	// that of Type's tasks (keel's own queue).
	Queue, HookQueue string
	// MaxAttempts and Timeout are the follow-ups' defaults (Timeout also
	// Type's tasks').
	MaxAttempts int
	Timeout     time.Duration
	// Hook is the client's OnDead hook, run by Handle with the dead task.
	Hook func(ctx context.Context, row *driver.TaskRow) error
}

// Fallback builds follow-ups and runs the hook.
type Fallback struct{ cfg Config }

// New returns a Fallback.
func New(cfg Config) *Fallback { return &Fallback{cfg: cfg} }

// FollowUps returns the tasks to insert with row's dead-lettering by t
// (the engine's Config.FollowUps): its type's on_dead follow-up and the
// hook's task, as its declaration asks. A row without payload (the
// rescuer's) is read first.
func (f *Fallback) FollowUps(ctx context.Context, row *driver.TaskRow, t driver.Transition) ([]driver.InsertParams, error) {
	if f.cfg.Reserved != nil && f.cfg.Reserved(row.Type) {
		return nil, nil
	}
	decl, err := f.cfg.Declaration(ctx, row.Type)
	if err != nil || decl == nil {
		return nil, err
	}
	onDead, hook := decl.OnDead, decl.OnDeadHook
	if onDead == "" && !hook {
		return nil, nil
	}
	payload, meta := row.Payload, row.Meta
	if payload == nil { // the rescuer's row: read the task
		full, err := f.cfg.Driver.Get(ctx, row.ID)
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
	dead := Payload{TaskID: row.ID, Type: row.Type, Queue: row.Queue, Attempt: row.Attempt, Payload: payload}
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
	markMeta, _ := json.Marshal(map[string]string{metaKey: strconv.FormatInt(row.ID, 10)})
	now := f.cfg.Now()
	var out []driver.InsertParams
	if onDead != "" {
		p := driver.InsertParams{Queue: f.cfg.Queue, Type: onDead, Payload: canon, MaxAttempts: f.cfg.MaxAttempts,
			RunAt: now, Timeout: f.cfg.Timeout, Now: now, Meta: markMeta,
			IdemKey:       digest.ExplicitKey(key(onDead, row.ID, row.Fence)),
			PayloadDigest: digest.Sum(append([]byte(onDead+"\x00"), canon...))}
		d, err := f.cfg.Declaration(ctx, onDead)
		if err != nil {
			return nil, err
		}
		if d != nil {
			if d.Queue != "" {
				p.Queue = d.Queue
			}
			if d.Priority != nil {
				p.Priority = *d.Priority
			}
			if d.MaxAttempts > 0 {
				p.MaxAttempts = d.MaxAttempts
			}
			if d.Timeout > 0 {
				p.Timeout = d.Timeout
			}
		}
		out = append(out, p)
	}
	if hook {
		out = append(out, driver.InsertParams{Queue: f.cfg.HookQueue, Type: Type, Payload: canon,
			MaxAttempts: hookAttempts, RunAt: now, Timeout: f.cfg.Timeout, Now: now, Meta: markMeta,
			IdemKey:       digest.ExplicitKey(key("hook", row.ID, row.Fence)),
			PayloadDigest: digest.Sum(append([]byte(Type+"\x00"), canon...))})
	}
	return out, nil
}

// Handle runs the hook for one task of Type (its engine handler): with
// the dead task as Get finds it now, or, when it is gone (purged), as the
// task's payload describes it. An undecodable payload is a permanent
// failure; a failed read or hook is retried.
func (f *Fallback) Handle(ctx context.Context, row *driver.TaskRow) (json.RawMessage, error) {
	var dead Payload
	if err := json.Unmarshal(row.Payload, &dead); err != nil {
		return nil, &outcome.Permanent{Err: fmt.Errorf("on_dead payload: %w", err)}
	}
	task, err := f.cfg.Driver.Get(ctx, dead.TaskID)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		task = &driver.TaskRow{ID: dead.TaskID, Type: dead.Type, Queue: dead.Queue, State: driver.StateDead,
			Attempt: dead.Attempt, Payload: dead.Payload,
			Errors: []driver.AttemptError{{Attempt: dead.Attempt, Error: dead.Error}}}
	case err != nil:
		return nil, driver.Unavailable(ctx, err, nil)
	}
	return nil, f.cfg.Hook(ctx, task)
}

// key is the idempotency key of a dead task's follow-up of kind (a type
// name, or "hook"): one per death, even when the write repeats.
func key(kind string, id, fence int64) string {
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
	_, ok := m[metaKey]
	return ok
}
