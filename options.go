package keel

import (
	"time"

	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/enqueue"
)

// Option sets one property of a task. Passed to Enqueue it applies to that
// task; passed to Handle it becomes the default for the type.
type Option func(*options)

// options are the properties the options set (internal/enqueue reads them).
type options = enqueue.Options

// Queue puts the task on the named queue. Default "default".
func Queue(name string) Option { return func(o *options) { o.Queue = enqueue.Ptr(name) } }

// Priority orders ready tasks of a queue: larger runs first. Default 0.
func Priority(p int) Option { return func(o *options) { o.Priority = enqueue.Ptr(p) } }

// RunAt schedules the task not to start before t. t must lie in the years
// 1000 to 9999 (UTC), the range every supported database stores exactly
// (to the microsecond), and not be 9999-12-31T23:59:59Z, which marks a
// held task (TaskInfo.Held); another time is refused with ErrInvalid.
// Default now.
func RunAt(t time.Time) Option { return func(o *options) { o.RunAt = enqueue.Ptr(t) } }

// Delay schedules the task to start d from now. Default 0.
func Delay(d time.Duration) Option { return func(o *options) { o.Delay = enqueue.Ptr(d) } }

// MaxAttempts bounds how often the task runs before it is dead-lettered.
// Default Config.MaxAttempts (4: one run and three retries).
func MaxAttempts(n int) Option { return func(o *options) { o.MaxAttempts = enqueue.Ptr(n) } }

// Timeout bounds one attempt; an attempt that exceeds it is recorded as a
// timeout and retried. Default Config.Timeout (60s).
func Timeout(d time.Duration) Option { return func(o *options) { o.Timeout = enqueue.Ptr(d) } }

// UniqueBy dedupes by content: the idempotency key is SHA-256 over the type,
// naturalKey and the canonical payload. Submitting the same content again
// returns the existing task with Duplicate set; changed content is new work.
// The key is held while the task is pending, running or succeeded.
func UniqueBy(naturalKey string) Option {
	return func(o *options) { o.UniqueBy = enqueue.Ptr(naturalKey) }
}

// IdempotencyKey dedupes by the caller's own key. A replay with the same
// payload returns the existing task with Duplicate set; the same key with a
// different payload or type fails with ErrIdempotencyConflict. Dead and
// cancelled tasks release their key.
func IdempotencyKey(key string) Option { return func(o *options) { o.IdemKey = enqueue.Ptr(key) } }

// Backoff sets a type's retry delays: base × 2^(attempt-1), at most max,
// with Config.BackoffJitter. Only meaningful on Handle. Default
// Config.BackoffBase and Config.BackoffMax.
func Backoff(base, max time.Duration) Option {
	return func(o *options) { o.Backoff = &backoff.Policy{Base: base, Max: max} }
}

// MaxSnoozes bounds how often a task of the type may Snooze: the next
// snooze dead-letters it with outcome "snoozed". Only meaningful on Handle
// (it is the type's bound, not stored per task). Default
// Config.MaxSnoozes (100).
func MaxSnoozes(n int) Option { return func(o *options) { o.MaxSnoozes = enqueue.Ptr(n) } }

// Meta attaches string tags (tenants, request ids) stored with the task.
// When the enqueue runs inside an OpenTelemetry span, keel adds the keys
// traceparent and tracestate (the enqueue span's W3C trace context),
// replacing tags of those names. Default none.
func Meta(tags map[string]string) Option { return func(o *options) { o.Meta = tags } }

// Sequence puts the task in the sequence key: tasks with the same key run
// one at a time, in enqueue order, across every process; other keys run
// in parallel. Until its turn a task is pending and Held. A dead member
// holds the rest of its sequence (an alert says so) until it is retried,
// deleted or archived, unless SequenceSkipDead is given. The key is 1-255
// bytes of UTF-8 without NUL. See docs/sequences.md.
func Sequence(key string) Option { return func(o *options) { o.Sequence = enqueue.Ptr(key) } }

// SequenceSkipDead lets a dead member of the task's sequence release the
// members after it, instead of holding them. The latest enqueue of a key
// sets it for the key.
func SequenceSkipDead() Option { return func(o *options) { o.SkipDead = true } }

// RuleSequenceBlocked is the alert rule that fires for each sequence key
// held by a dead member.
const RuleSequenceBlocked = "sequence_blocked"

// DependsOn holds the task until the tasks with these ids have all
// succeeded; if one of them dies or is cancelled, the task is cancelled
// with that reason (see package workflow). Each must be in keel_tasks
// (pending, running or finished, not archived), else ErrInvalid. Excludes
// RunAt and Delay. Default none.
func DependsOn(ids ...int64) Option {
	return func(o *options) { o.DependsOn = append(o.DependsOn, ids...) }
}
