// Package enqueue turns a task as the caller describes it (type, payload,
// options) into the parameters of its insert: it checks names, options and
// payload, applies the type's defaults (this client's registration, else
// the stored declaration, else the configuration's) and derives the
// canonical payload, its digest and the idempotency key.
package enqueue

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/kerr"
)

// Options are a task's properties as the option functions set them: nil
// is unset. Given to Handle or Declare they are the type's defaults.
type Options struct {
	Queue       *string
	Priority    *int
	RunAt       *time.Time
	Delay       *time.Duration
	MaxAttempts *int
	Timeout     *time.Duration
	UniqueBy    *string
	IdemKey     *string
	Backoff     *backoff.Policy
	MaxSnoozes  *int
	Meta        map[string]string
	OnDead      *string
	Brake       *driver.BrakeConfig
	// Sequence is the task's sequence key; SkipDead lets a dead member
	// release the rest of its sequence.
	Sequence *string
	SkipDead bool
	// OnDeadHook: the type's deaths run Config.OnDead (set by NewClient
	// for the types the client handles).
	OnDeadHook bool
	// DependsOn are the ids of the tasks this one waits for (per call).
	DependsOn []int64
}

// MaxSnoozesLimit is the largest MaxSnoozes keel accepts.
const MaxSnoozesLimit = 1_000_000

// KeelQueue is the queue of keel's own tasks (keel.ReservedQueue), and
// KeelTypePrefix begins their types; users may use neither.
const (
	KeelQueue      = "keel"
	KeelTypePrefix = "keel."
)

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Merge applies opts, in order, on top of o.
func Merge[F ~func(*Options)](o Options, opts []F) Options {
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// Declared reports whether o sets any default that keel_types stores
// (queue, priority, max attempts, timeout, backoff, on_dead, the OnDead
// hook, the brake).
func (o Options) Declared() bool {
	return o.Queue != nil || o.Priority != nil || o.MaxAttempts != nil || o.Timeout != nil || o.Backoff != nil ||
		o.OnDead != nil || o.OnDeadHook || o.Brake != nil
}

// TypeDefaults is o as the stored declaration of taskType.
func (o Options) TypeDefaults(taskType string) driver.TypeDefaults {
	t := driver.TypeDefaults{Name: taskType, Priority: o.Priority}
	if o.Queue != nil {
		t.Queue = *o.Queue
	}
	if o.MaxAttempts != nil {
		t.MaxAttempts = *o.MaxAttempts
	}
	if o.Timeout != nil {
		t.Timeout = *o.Timeout
	}
	if o.Backoff != nil {
		t.BackoffBase, t.BackoffMax = o.Backoff.Base, o.Backoff.Max
	}
	t.OnDead, t.OnDeadHook, t.Brake = deref(o.OnDead), o.OnDeadHook, deref(o.Brake)
	return t
}

// DeclaredTypes are the stored declarations of the types that set any
// default, for keel_types.
func DeclaredTypes(types map[string]Options) []driver.TypeDefaults {
	var out []driver.TypeDefaults
	for name, o := range types {
		if o.Declared() {
			out = append(out, o.TypeDefaults(name))
		}
	}
	return out
}

// StoredOptions are the enqueue defaults of a stored declaration (nil:
// none stored): its queue, priority, max attempts and timeout.
func StoredOptions(t *driver.TypeDefaults) Options {
	var o Options
	if t == nil {
		return o
	}
	if t.Queue != "" {
		o.Queue = Ptr(t.Queue)
	}
	if t.Priority != nil {
		o.Priority = Ptr(*t.Priority)
	}
	if t.MaxAttempts > 0 {
		o.MaxAttempts = Ptr(t.MaxAttempts)
	}
	if t.Timeout > 0 {
		o.Timeout = Ptr(t.Timeout)
	}
	return o
}

// Validate checks option values, naming the bad one.
func (o Options) Validate() error {
	invalid := kerr.Invalid
	switch {
	case o.Queue != nil && !driver.ValidName(*o.Queue):
		return invalid("invalid queue name %q: use 1-128 letters, digits, '_', '.', ':' or '-'", *o.Queue)
	case o.Queue != nil && *o.Queue == KeelQueue:
		return invalid("queue %q is reserved for keel's own tasks (alert deliveries, the drill)", *o.Queue)
	case o.Priority != nil && (*o.Priority < -1_000_000 || *o.Priority > 1_000_000):
		return invalid("priority %d out of range [-1000000, 1000000]", *o.Priority)
	case o.Delay != nil && *o.Delay < 0:
		return invalid("negative delay %v", *o.Delay)
	case o.MaxAttempts != nil && *o.MaxAttempts < 1:
		return invalid("max attempts must be at least 1, got %d", *o.MaxAttempts)
	case o.MaxAttempts != nil && *o.MaxAttempts > 1000:
		return invalid("max attempts must be at most 1000, got %d", *o.MaxAttempts)
	case o.Timeout != nil && *o.Timeout <= 0:
		return invalid("timeout must be positive, got %v", *o.Timeout)
	case o.Timeout != nil && *o.Timeout < time.Millisecond:
		return invalid("timeout must be at least 1ms, got %v", *o.Timeout)
	case o.UniqueBy != nil && (*o.UniqueBy == "" || len(*o.UniqueBy) > 1024):
		return invalid("UniqueBy natural key must be 1-1024 bytes, got %d", len(*o.UniqueBy))
	case o.IdemKey != nil && (*o.IdemKey == "" || len(*o.IdemKey) > 255):
		return invalid("idempotency key must be 1-255 bytes, got %d", len(*o.IdemKey))
	case o.Sequence != nil && (*o.Sequence == "" || len(*o.Sequence) > driver.MaxSequenceKey):
		return invalid("sequence key must be 1-%d bytes, got %d", driver.MaxSequenceKey, len(*o.Sequence))
	case o.Sequence != nil && (!utf8.ValidString(*o.Sequence) || strings.ContainsRune(*o.Sequence, 0)):
		return invalid("sequence key %q must be valid UTF-8 without NUL characters", *o.Sequence)
	case o.SkipDead && o.Sequence == nil:
		return invalid("SequenceSkipDead applies only with Sequence")
	case o.UniqueBy != nil && o.IdemKey != nil:
		return invalid("UniqueBy and IdempotencyKey are exclusive")
	case o.RunAt != nil && o.Delay != nil:
		return invalid("RunAt and Delay are exclusive")
	case len(o.DependsOn) > 0 && o.Sequence != nil:
		return invalid("DependsOn and Sequence are exclusive")
	case len(o.DependsOn) > 0 && (o.RunAt != nil || o.Delay != nil):
		return invalid("DependsOn excludes RunAt and Delay: a dependent runs when its dependencies have succeeded")
	case o.MaxSnoozes != nil && (*o.MaxSnoozes < 1 || *o.MaxSnoozes > MaxSnoozesLimit):
		return invalid("max snoozes must be in 1..%d, got %d", MaxSnoozesLimit, *o.MaxSnoozes)
	case o.OnDead != nil && !driver.ValidName(*o.OnDead):
		return invalid("invalid on_dead type %q: use 1-128 letters, digits, '_', '.', ':' or '-'", *o.OnDead)
	case o.OnDead != nil && ReservedType(*o.OnDead):
		return invalid("on_dead type %q: names starting with %q are reserved for keel's own tasks", *o.OnDead, KeelTypePrefix)
	case o.Brake != nil && o.Brake.Window != -1 && (o.Brake.Window < 0 || o.Brake.Window > 10000):
		return invalid("brake window must be in 1..10000 (0: the default), got %d", o.Brake.Window)
	case o.Brake != nil && (o.Brake.Threshold < 0 || o.Brake.Threshold > 1 || o.Brake.Threshold != o.Brake.Threshold):
		return invalid("brake threshold must be in (0, 1] (0: the default), got %v", o.Brake.Threshold)
	case o.Brake != nil && o.Brake.Cooldown < 0:
		return invalid("brake cooldown must not be negative (0: the default), got %v", o.Brake.Cooldown)
	case o.Brake != nil && o.Brake.Cooldown%time.Millisecond != 0:
		return invalid("brake cooldown must be a whole number of milliseconds (settings are stored in ms), got %v", o.Brake.Cooldown)
	case o.Backoff != nil && (o.Backoff.Base <= 0 || o.Backoff.Max < o.Backoff.Base):
		return invalid("backoff needs 0 < base <= max, got base %v max %v", o.Backoff.Base, o.Backoff.Max)
	}
	if o.RunAt != nil {
		if err := CheckRunAt(*o.RunAt, ""); err != nil {
			return err
		}
	}
	for _, id := range o.DependsOn {
		if id <= 0 {
			return invalid("DependsOn: task id %d is not positive", id)
		}
	}
	for k := range o.Meta {
		if k == "" || len(k) > 128 {
			return invalid("meta keys must be 1-128 bytes")
		}
	}
	return nil
}
