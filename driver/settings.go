package driver

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Runtime settings (keel_settings) and declared type defaults (keel_types).

// SettingKind says what a runtime setting applies to.
type SettingKind string

// The kinds of runtime settings.
const (
	SettingQueue SettingKind = "queue"
	SettingType  SettingKind = "type"
)

// Setting is one row of keel_settings: runtime settings of one queue or one
// task type, changed without a restart and applied by every node within its
// settings refresh interval. Zero numeric fields mean "not set here" (the
// process configuration or the task's own value applies).
type Setting struct {
	Kind   SettingKind
	Name   string
	Paused bool // queue: no claims; type: its tasks are not claimed
	// Concurrency caps how many of a queue's (or a type's) tasks run at
	// once across every node of the cluster (a limited claim counts them
	// in the database); each node also stays within its own MaxWorkers.
	Concurrency int
	// Rate caps how many of the queue's (or type's) tasks start per
	// second across the cluster (a token bucket refilled at Rate); 0: no
	// rate limit.
	Rate float64
	// Burst is the token bucket's size: how many tasks may start at once
	// after a quiet spell; 0 means max(1, ceil(Rate)).
	Burst       int
	Timeout     time.Duration // type: overrides the attempt timeout
	MaxAttempts int           // type: overrides the task's max attempts
	BackoffBase time.Duration // type: first retry delay
	BackoffMax  time.Duration // type: retry delay cap
	UpdatedAt   time.Time
}

// SettingPatch changes some fields of one setting, creating its row when it
// does not exist. Nil fields keep their stored value (or the zero value on
// a new row); a pointer to zero clears a numeric override. Durations are
// stored in whole milliseconds: they are truncated, except that a positive
// duration below 1ms is stored as 1ms so that it stays set. Now is the
// time recorded in UpdatedAt (drivers that use the database clock ignore
// it, as for other writes).
type SettingPatch struct {
	Kind        SettingKind
	Name        string
	Paused      *bool
	Concurrency *int
	// Rate and Burst set the token bucket (see Setting); setting either
	// refills the bucket.
	Rate        *float64
	Burst       *int
	Timeout     *time.Duration
	MaxAttempts *int
	BackoffBase *time.Duration
	BackoffMax  *time.Duration
	Now         time.Time
}

// TypeDefaults is one row of keel_types: the defaults a task type was
// declared with (keel.Handle or keel.Declare options), stored so that every
// client enqueuing the type applies them, including clients that did not
// register it. Zero fields (nil Priority) are not set: the enqueuing
// client's configuration applies.
type TypeDefaults struct {
	Name        string
	Queue       string
	Priority    *int
	MaxAttempts int
	Timeout     time.Duration // stored in milliseconds, like settings
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// OnDead is the type of the follow-up task enqueued, in the same
	// transaction, when a task of this type is dead-lettered ("": none).
	OnDead string
	// OnDeadHook: a dead task of this type also enqueues a keel.on_dead
	// task, which runs the library's Config.OnDead hook.
	OnDeadHook bool
	// Brake holds the automatic brake's thresholds declared for the type
	// (zero fields: keel's defaults).
	Brake     BrakeConfig
	UpdatedAt time.Time
}

// Equal reports whether t and o declare the same defaults (UpdatedAt
// aside), durations compared as stored (SettingMillis).
func (t TypeDefaults) Equal(o TypeDefaults) bool {
	ms := func(d time.Duration) int64 { return *SettingMillis(&d) }
	samePriority := (t.Priority == nil) == (o.Priority == nil) && (t.Priority == nil || *t.Priority == *o.Priority)
	return t.Name == o.Name && t.Queue == o.Queue && samePriority && t.MaxAttempts == o.MaxAttempts &&
		ms(t.Timeout) == ms(o.Timeout) && ms(t.BackoffBase) == ms(o.BackoffBase) && ms(t.BackoffMax) == ms(o.BackoffMax) &&
		t.OnDead == o.OnDead && t.OnDeadHook == o.OnDeadHook && t.Brake.Window == o.Brake.Window &&
		t.Brake.Threshold == o.Brake.Threshold && ms(t.Brake.Cooldown) == ms(o.Brake.Cooldown)
}

// DeclareTypesParams stores the defaults of several task types: each row
// replaces the type's stored row whole (the last writer wins). Now is the
// time recorded in UpdatedAt (drivers that use the database clock ignore
// it).
type DeclareTypesParams struct {
	Types []TypeDefaults
	Now   time.Time
}

// Validate rejects what no driver stores: an empty or duplicate name, or
// a negative number.
func (p DeclareTypesParams) Validate() error {
	seen := make(map[string]bool, len(p.Types))
	for _, t := range p.Types {
		switch {
		case t.Name == "":
			return errors.New("declare types: empty name")
		case seen[t.Name]:
			return fmt.Errorf("declare types: %q given twice", t.Name)
		case t.MaxAttempts < 0 || t.Timeout < 0 || t.BackoffBase < 0 || t.BackoffMax < 0:
			return fmt.Errorf("declare types: %q: negative value", t.Name)
		case t.OnDead == t.Name:
			return fmt.Errorf("declare types: %q: on_dead names the type itself", t.Name)
		case t.Brake.Window < -1 || t.Brake.Threshold < 0 || t.Brake.Threshold > 1 || t.Brake.Cooldown < 0:
			return fmt.Errorf("declare types: %q: brake thresholds out of range", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// Validate rejects a patch no driver can store: an unknown kind, an
// empty name, a negative number, or a rate that is not a finite number.
func (p SettingPatch) Validate() error {
	if p.Kind != SettingQueue && p.Kind != SettingType {
		return fmt.Errorf("kind must be queue or type, got %q", p.Kind)
	}
	if p.Name == "" {
		return errors.New("empty name")
	}
	if p.Concurrency != nil && *p.Concurrency < 0 {
		return fmt.Errorf("concurrency must not be negative, got %d", *p.Concurrency)
	}
	if p.Rate != nil && (math.IsNaN(*p.Rate) || math.IsInf(*p.Rate, 0) || *p.Rate < 0) {
		return fmt.Errorf("rate must be a finite number of tasks per second, not negative, got %v", *p.Rate)
	}
	if p.Burst != nil && *p.Burst < 0 {
		return fmt.Errorf("burst must not be negative, got %d", *p.Burst)
	}
	for name, d := range map[string]*time.Duration{"timeout": p.Timeout, "backoff base": p.BackoffBase, "backoff max": p.BackoffMax} {
		if d != nil && *d < 0 {
			return fmt.Errorf("%s must not be negative, got %s", name, *d)
		}
	}
	if p.MaxAttempts != nil && *p.MaxAttempts < 0 {
		return fmt.Errorf("max attempts must not be negative, got %d", *p.MaxAttempts)
	}
	return nil
}

// SettingMillis is how drivers store a setting's duration: whole
// milliseconds, nil when d is nil. A positive duration below 1ms is kept as
// 1ms, so that it stays set.
func SettingMillis(d *time.Duration) *int64 {
	if d == nil {
		return nil
	}
	ms := d.Milliseconds()
	if ms == 0 && *d > 0 {
		ms = 1
	}
	return &ms
}

// SettingDuration reads back a duration stored by SettingMillis.
func SettingDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
