package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Periodic tasks (keel_schedules). A schedule's row holds its definition
// and last_tick: the last tick the leader enqueued (or, for missed ticks
// under the skip policy, passed over). The leader enqueues a tick with
// EnqueueTick, which advances last_tick with a compare-and-set and inserts
// the tick's task in one transaction, so each tick is enqueued once across
// every process and leader change. Spec and time zone are stored as given;
// the root package parses them (the driver never does).

// The missed-tick policies a schedule row stores.
const (
	MissedRunOnce = "run_once"
	MissedSkip    = "skip"
)

// Limits of the schedule columns, the same on every database.
const (
	MaxScheduleName     = 128
	MaxScheduleSpec     = 200
	MaxScheduleTimeZone = 64
	MaxSchedulePayload  = 64 << 10
)

// ScheduleRow is one row of keel_schedules.
type ScheduleRow struct {
	Name     string
	Spec     string // cron expression or descriptor ("@every 10s", "@hourly")
	TimeZone string // IANA name, "UTC" included
	Type     string
	Queue    string
	Payload  json.RawMessage
	Priority int
	Missed   string // MissedRunOnce or MissedSkip
	Paused   bool
	// LastTick is the last tick enqueued or passed over, whole seconds;
	// at creation the instant the schedule was first stored.
	LastTick  time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ScheduleParams defines a schedule for UpsertSchedules.
type ScheduleParams struct {
	Name, Spec, TimeZone, Type, Queue string
	Payload                           json.RawMessage // a JSON value
	Priority                          int
	Missed                            string
	// Now is the write's time; a new schedule's LastTick is Now truncated
	// to the second, so it does not run the ticks before it existed.
	Now time.Time
}

// TickParams advances schedule Name's LastTick from Prev to Tick and, in
// the same transaction, inserts Task (nil: advance only, a tick passed
// over). Nothing is written when LastTick is no longer Prev (another
// leader moved it) or the schedule is paused.
type TickParams struct {
	Name       string
	Prev, Tick time.Time // whole seconds, Tick after Prev
	Task       *InsertParams
	Now        time.Time
}

// PauseScheduleParams pauses or resumes schedule Name. A resume of a
// paused schedule moves LastTick to Now (truncated to the second, never
// back), so the ticks of the paused period never run.
type PauseScheduleParams struct {
	Name   string
	Paused bool
	Now    time.Time
}

// ScheduleStore is the part of the driver contract for periodic tasks.
type ScheduleStore interface {
	// UpsertSchedules stores definitions in one transaction, in name
	// order: a new schedule is created unpaused with LastTick at Now; an
	// existing one takes the new definition and keeps Paused and LastTick,
	// except that a changed Spec or TimeZone moves LastTick to Now (never
	// back): the new spec's ticks count from the change, none is due at
	// once.
	UpsertSchedules(ctx context.Context, params []ScheduleParams) error
	// ListSchedules returns every schedule ordered by name.
	ListSchedules(ctx context.Context) ([]ScheduleRow, error)
	// GetSchedule loads one schedule or returns ErrNotFound.
	GetSchedule(ctx context.Context, name string) (*ScheduleRow, error)
	// PauseSchedule pauses or resumes a schedule (see PauseScheduleParams)
	// and returns it; an unknown name is ErrNotFound.
	PauseSchedule(ctx context.Context, params PauseScheduleParams) (*ScheduleRow, error)
	// DeleteSchedule deletes a schedule; an unknown name is ErrNotFound.
	// Tasks it enqueued stay.
	DeleteSchedule(ctx context.Context, name string) error
	// EnqueueTick applies params (see TickParams) and reports whether it
	// advanced LastTick; the task inserted is returned when it did and
	// Task was given (a held idempotency key returns the holder, as
	// Insert does).
	EnqueueTick(ctx context.Context, params TickParams) (*InsertResult, bool, error)
}

// ValidScheduleName reports whether s is a valid schedule name: 1–128
// letters, digits and _ . : -, starting with a letter or digit.
func ValidScheduleName(s string) bool { return ValidName(s) }

// Validate rejects what no driver stores.
func (p ScheduleParams) Validate() error {
	var errs []error
	if !ValidScheduleName(p.Name) {
		errs = append(errs, fmt.Errorf("name %.140q: use 1-128 letters, digits, '_', '.', ':' or '-'", p.Name))
	}
	errs = append(errs,
		checkText("spec", p.Spec, MaxScheduleSpec, true),
		checkText("time zone", p.TimeZone, MaxScheduleTimeZone, true),
		checkText("type", p.Type, 128, true),
		checkText("queue", p.Queue, 128, true),
	)
	switch {
	case len(p.Payload) > MaxSchedulePayload:
		errs = append(errs, fmt.Errorf("payload is %d bytes, over the limit of %d", len(p.Payload), MaxSchedulePayload))
	case !json.Valid(p.Payload):
		errs = append(errs, fmt.Errorf("payload must be a JSON value, got %.40q", p.Payload))
	default:
		errs = append(errs, checkText("payload", string(p.Payload), MaxSchedulePayload, true))
	}
	if p.Missed != MissedRunOnce && p.Missed != MissedSkip {
		errs = append(errs, fmt.Errorf("missed policy must be %q or %q, got %q", MissedRunOnce, MissedSkip, p.Missed))
	}
	if p.Now.IsZero() {
		errs = append(errs, errors.New("now must be set"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("schedule %.140q: %w", p.Name, err)
	}
	return nil
}

// Validate rejects a tick no driver applies.
func (p TickParams) Validate() error {
	switch {
	case !ValidScheduleName(p.Name):
		return fmt.Errorf("invalid schedule name %.140q", p.Name)
	case p.Prev.IsZero() || p.Tick.IsZero():
		return fmt.Errorf("schedule %s: prev and tick must be set", p.Name)
	case !p.Prev.Equal(p.Prev.Truncate(time.Second)) || !p.Tick.Equal(p.Tick.Truncate(time.Second)):
		return fmt.Errorf("schedule %s: ticks are whole seconds, got %v and %v", p.Name, p.Prev, p.Tick)
	case !p.Tick.After(p.Prev):
		return fmt.Errorf("schedule %s: tick %v is not after the last tick %v", p.Name, p.Tick, p.Prev)
	}
	return nil
}

// ScheduleTime is how a schedule's LastTick is stored: unix seconds.
func ScheduleTime(t time.Time) int64 { return t.Unix() }

// SortedSchedules validates params and returns them ordered by name, the
// order every driver writes them in (so concurrent upserts do not
// deadlock); a name given twice is an error.
func SortedSchedules(params []ScheduleParams) ([]ScheduleParams, error) {
	out := make([]ScheduleParams, len(params))
	copy(out, params)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for i, p := range out {
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if i > 0 && out[i-1].Name == p.Name {
			return nil, fmt.Errorf("schedule %q given twice", p.Name)
		}
	}
	return out, nil
}
