package keel

import (
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/backoff"
)

// Option sets one property of a task. Passed to Enqueue it applies to that
// task; passed to Handle it becomes the default for the type.
type Option func(*options)

type options struct {
	queue       *string
	priority    *int
	runAt       *time.Time
	delay       *time.Duration
	maxAttempts *int
	timeout     *time.Duration
	uniqueBy    *string
	idemKey     *string
	backoff     *backoff.Policy
	maxSnoozes  *int
	meta        map[string]string
	onDead      *string
	brake       *driver.BrakeConfig
	// onDeadHook: the type's deaths run Config.OnDead (set by NewClient
	// for the types the client handles).
	onDeadHook bool
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Queue puts the task on the named queue. Default "default".
func Queue(name string) Option { return func(o *options) { o.queue = ptr(name) } }

// Priority orders ready tasks of a queue: larger runs first. Default 0.
func Priority(p int) Option { return func(o *options) { o.priority = ptr(p) } }

// RunAt schedules the task not to start before t. t must lie in the years
// 1000 to 9999 (UTC), the range every supported database stores exactly
// (to the microsecond); a time outside it is refused with ErrInvalid.
// Default now.
func RunAt(t time.Time) Option { return func(o *options) { o.runAt = ptr(t) } }

// The run times keel accepts, [minRunAt, endRunAt): the range of MariaDB's
// DATETIME(6), the narrowest of the three databases (PostgreSQL's
// timestamptz spans 4713 BC to 294276 AD, SQLite stores Unix microseconds
// in an int64).
var (
	minRunAt = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	endRunAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// checkRunAt refuses a run time outside the range every database stores
// exactly; how, when not empty, says how the time came about.
func checkRunAt(t time.Time, how string) error {
	if t.Before(minRunAt) || !t.Before(endRunAt) {
		return invalid("run_at %s%s is out of range: use a time in the years 1000 to 9999 (UTC)",
			t.UTC().Format(time.RFC3339Nano), how)
	}
	return nil
}

// checkTimeFilter refuses a time filter outside the range run_at has, so
// that every database answers it alike (MariaDB's DATETIME cannot even
// compare with year 0); a zero t is no filter and passes.
func checkTimeFilter(name string, t time.Time) error {
	if !t.IsZero() && (t.Before(minRunAt) || !t.Before(endRunAt)) {
		return invalid("%s %s is out of range: use a time in the years 1000 to 9999 (UTC)",
			name, t.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// checkTimeFilters runs checkTimeFilter over name, time pairs.
func checkTimeFilters(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := checkTimeFilter(pairs[i].(string), pairs[i+1].(time.Time)); err != nil {
			return err
		}
	}
	return nil
}

// Delay schedules the task to start d from now. Default 0.
func Delay(d time.Duration) Option { return func(o *options) { o.delay = ptr(d) } }

// MaxAttempts bounds how often the task runs before it is dead-lettered.
// Default Config.MaxAttempts (4: one run and three retries).
func MaxAttempts(n int) Option { return func(o *options) { o.maxAttempts = ptr(n) } }

// Timeout bounds one attempt; an attempt that exceeds it is recorded as a
// timeout and retried. Default Config.Timeout (60s).
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = ptr(d) } }

// UniqueBy dedupes by content: the idempotency key is SHA-256 over the type,
// naturalKey and the canonical payload. Submitting the same content again
// returns the existing task with Duplicate set; changed content is new work.
// The key is held while the task is pending, running or succeeded.
func UniqueBy(naturalKey string) Option { return func(o *options) { o.uniqueBy = ptr(naturalKey) } }

// IdempotencyKey dedupes by the caller's own key. A replay with the same
// payload returns the existing task with Duplicate set; the same key with a
// different payload or type fails with ErrIdempotencyConflict. Dead and
// cancelled tasks release their key.
func IdempotencyKey(key string) Option { return func(o *options) { o.idemKey = ptr(key) } }

// Backoff sets a type's retry delays: base × 2^(attempt-1), at most max,
// with Config.BackoffJitter. Only meaningful on Handle. Default
// Config.BackoffBase and Config.BackoffMax.
func Backoff(base, max time.Duration) Option {
	return func(o *options) { o.backoff = &backoff.Policy{Base: base, Max: max} }
}

// MaxSnoozes bounds how often a task of the type may Snooze: the next
// snooze dead-letters it with outcome "snoozed". Only meaningful on Handle
// (it is the type's bound, not stored per task). Default
// Config.MaxSnoozes (100).
func MaxSnoozes(n int) Option { return func(o *options) { o.maxSnoozes = ptr(n) } }

// Meta attaches string tags (tenants, request ids) stored with the task.
// When the enqueue runs inside an OpenTelemetry span, keel adds the keys
// traceparent and tracestate (the enqueue span's W3C trace context),
// replacing tags of those names. Default none.
func Meta(tags map[string]string) Option { return func(o *options) { o.meta = tags } }

// declared reports whether o sets any default that keel_types stores
// (queue, priority, max attempts, timeout, backoff, on_dead, the OnDead
// hook).
func (o options) declared() bool {
	return o.queue != nil || o.priority != nil || o.maxAttempts != nil || o.timeout != nil || o.backoff != nil ||
		o.onDead != nil || o.onDeadHook || o.brake != nil
}

// typeDefaults is o as the stored declaration of taskType.
func (o options) typeDefaults(taskType string) driver.TypeDefaults {
	t := driver.TypeDefaults{Name: taskType, Priority: o.priority}
	if o.queue != nil {
		t.Queue = *o.queue
	}
	if o.maxAttempts != nil {
		t.MaxAttempts = *o.maxAttempts
	}
	if o.timeout != nil {
		t.Timeout = *o.timeout
	}
	if o.backoff != nil {
		t.BackoffBase, t.BackoffMax = o.backoff.Base, o.backoff.Max
	}
	t.OnDead, t.OnDeadHook, t.Brake = deref(o.onDead), o.onDeadHook, deref(o.brake)
	return t
}

// declaredTypes are the stored declarations of the types that set any
// default, for keel_types.
func declaredTypes(types map[string]options) []driver.TypeDefaults {
	var out []driver.TypeDefaults
	for name, o := range types {
		if o.declared() {
			out = append(out, o.typeDefaults(name))
		}
	}
	return out
}

// storedOptions are the enqueue defaults of a stored declaration (nil:
// none stored): its queue, priority, max attempts and timeout.
func storedOptions(t *driver.TypeDefaults) options {
	var o options
	if t == nil {
		return o
	}
	if t.Queue != "" {
		o.queue = ptr(t.Queue)
	}
	if t.Priority != nil {
		o.priority = ptr(*t.Priority)
	}
	if t.MaxAttempts > 0 {
		o.maxAttempts = ptr(t.MaxAttempts)
	}
	if t.Timeout > 0 {
		o.timeout = ptr(t.Timeout)
	}
	return o
}

// merge applies override on top of o.
func (o options) merge(opts []Option) options {
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// validate checks option values, naming the bad one.
func (o options) validate() error {
	switch {
	case o.queue != nil && !validName(*o.queue):
		return invalid("invalid queue name %q: use 1-128 letters, digits, '_', '.', ':' or '-'", *o.queue)
	case o.queue != nil && reservedQueue(*o.queue):
		return invalid("queue %q is reserved for keel's own tasks (alert deliveries, the drill)", *o.queue)
	case o.priority != nil && (*o.priority < -1_000_000 || *o.priority > 1_000_000):
		return invalid("priority %d out of range [-1000000, 1000000]", *o.priority)
	case o.delay != nil && *o.delay < 0:
		return invalid("negative delay %v", *o.delay)
	case o.maxAttempts != nil && *o.maxAttempts < 1:
		return invalid("max attempts must be at least 1, got %d", *o.maxAttempts)
	case o.maxAttempts != nil && *o.maxAttempts > 1000:
		return invalid("max attempts must be at most 1000, got %d", *o.maxAttempts)
	case o.timeout != nil && *o.timeout <= 0:
		return invalid("timeout must be positive, got %v", *o.timeout)
	case o.timeout != nil && *o.timeout < time.Millisecond:
		return invalid("timeout must be at least 1ms, got %v", *o.timeout)
	case o.uniqueBy != nil && (*o.uniqueBy == "" || len(*o.uniqueBy) > 1024):
		return invalid("UniqueBy natural key must be 1-1024 bytes, got %d", len(*o.uniqueBy))
	case o.idemKey != nil && (*o.idemKey == "" || len(*o.idemKey) > 255):
		return invalid("idempotency key must be 1-255 bytes, got %d", len(*o.idemKey))
	case o.uniqueBy != nil && o.idemKey != nil:
		return invalid("UniqueBy and IdempotencyKey are exclusive")
	case o.runAt != nil && o.delay != nil:
		return invalid("RunAt and Delay are exclusive")
	case o.maxSnoozes != nil && (*o.maxSnoozes < 1 || *o.maxSnoozes > maxSnoozesLimit):
		return invalid("max snoozes must be in 1..%d, got %d", maxSnoozesLimit, *o.maxSnoozes)
	case o.onDead != nil && !validName(*o.onDead):
		return invalid("invalid on_dead type %q: use 1-128 letters, digits, '_', '.', ':' or '-'", *o.onDead)
	case o.onDead != nil && reservedType(*o.onDead):
		return invalid("on_dead type %q: names starting with %q are reserved for keel's own tasks", *o.onDead, reservedTypePrefix)
	case o.brake != nil && o.brake.Window != -1 && (o.brake.Window < 0 || o.brake.Window > 10000):
		return invalid("brake window must be in 1..10000 (0: the default), got %d", o.brake.Window)
	case o.brake != nil && (o.brake.Threshold < 0 || o.brake.Threshold > 1 || o.brake.Threshold != o.brake.Threshold):
		return invalid("brake threshold must be in (0, 1] (0: the default), got %v", o.brake.Threshold)
	case o.brake != nil && o.brake.Cooldown < 0:
		return invalid("brake cooldown must not be negative (0: the default), got %v", o.brake.Cooldown)
	case o.brake != nil && o.brake.Cooldown%time.Millisecond != 0:
		return invalid("brake cooldown must be a whole number of milliseconds (settings are stored in ms), got %v", o.brake.Cooldown)
	case o.backoff != nil && (o.backoff.Base <= 0 || o.backoff.Max < o.backoff.Base):
		return invalid("backoff needs 0 < base <= max, got base %v max %v", o.backoff.Base, o.backoff.Max)
	}
	if o.runAt != nil {
		if err := checkRunAt(*o.runAt, ""); err != nil {
			return err
		}
	}
	for k := range o.meta {
		if k == "" || len(k) > 128 {
			return invalid("meta keys must be 1-128 bytes")
		}
	}
	return nil
}
