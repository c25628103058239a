package enqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/scheduler"
)

// Schedule is a periodic task as configured (keel.Schedule documents
// each field): every tick enqueues a task of Type with these options, so
// the type, queue, priority and payload follow the rules of an enqueue.
type Schedule struct {
	Name, Spec, TimeZone, Type, Queue string
	Payload                           any
	Priority                          int
	Missed                            string
}

// Params validates s and returns it as the driver stores it, its empty
// fields given their defaults. The errors are ErrInvalid, naming the
// schedule and the field.
func (s Schedule) Params() (driver.ScheduleParams, error) {
	invalid := kerr.Invalid
	p := driver.ScheduleParams{Name: s.Name, Spec: s.Spec, TimeZone: s.TimeZone, Type: s.Type, Queue: s.Queue,
		Priority: s.Priority, Missed: s.Missed}
	if p.TimeZone == "" {
		p.TimeZone = "UTC"
	}
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if p.Missed == "" {
		p.Missed = driver.MissedRunOnce
	}
	switch {
	case !driver.ValidScheduleName(s.Name):
		return p, invalid("schedule %q: invalid name: use 1-128 letters, digits, '_', '.', ':' or '-'", s.Name)
	case s.Spec == "":
		return p, invalid("schedule %q: Spec is required (a cron expression such as \"*/5 * * * *\", or \"@every 10s\")", s.Name)
	case !driver.ValidName(s.Type):
		return p, invalid("schedule %q: invalid Type %q: use 1-128 letters, digits, '_', '.', ':' or '-'", s.Name, s.Type)
	case ReservedType(s.Type):
		return p, invalid("schedule %q: Type %q: names starting with %q are reserved for keel's own tasks", s.Name, s.Type, KeelTypePrefix)
	case !driver.ValidName(p.Queue):
		return p, invalid("schedule %q: invalid Queue %q", s.Name, p.Queue)
	case p.Queue == KeelQueue:
		return p, invalid("schedule %q: queue %q is reserved for keel's own tasks", s.Name, p.Queue)
	case s.Priority < -1_000_000 || s.Priority > 1_000_000:
		return p, invalid("schedule %q: Priority %d out of range [-1000000, 1000000]", s.Name, s.Priority)
	case p.Missed != driver.MissedRunOnce && p.Missed != driver.MissedSkip:
		return p, invalid("schedule %q: Missed must be %q or %q, got %q", s.Name, driver.MissedRunOnce, driver.MissedSkip, s.Missed)
	}
	if _, _, err := scheduler.Parse(s.Spec, p.TimeZone); err != nil {
		return p, invalid("schedule %q: %v", s.Name, err)
	}
	switch v := s.Payload.(type) {
	case json.RawMessage:
		p.Payload = v
	case []byte:
		p.Payload = v
	case nil:
		p.Payload = json.RawMessage("{}")
	default:
		raw, err := json.Marshal(v)
		if err != nil {
			return p, invalid("schedule %q: payload cannot be encoded as JSON: %v", s.Name, err)
		}
		p.Payload = raw
	}
	// Every trigger enqueues this payload: refuse now what no trigger
	// could enqueue (NUL, a lone surrogate, a key twice, deep nesting).
	if _, err := digest.Canonical(p.Payload); err != nil && json.Valid(p.Payload) {
		return p, invalid("schedule %q: %v", s.Name, err)
	}
	p.Now = time.Unix(1, 0) // checked here; the write sets its own time
	if err := p.Validate(); err != nil {
		return p, invalid("%v", err)
	}
	return p, nil
}

// CheckSchedules validates the configured schedules (Config.Schedules)
// and returns them as the driver stores them: each as Params does, its
// payload at most maxPayload bytes, and no name twice.
func CheckSchedules(schedules []Schedule, maxPayload int) ([]driver.ScheduleParams, error) {
	seen := map[string]bool{}
	var out []driver.ScheduleParams
	for i, s := range schedules {
		p, err := s.Params()
		if err != nil {
			return nil, fmt.Errorf("Config.Schedules[%d]: %w", i, err)
		}
		if len(p.Payload) > maxPayload {
			return nil, fmt.Errorf("Config.Schedules[%d]: schedule %q: %w: %d bytes, the limit is %d", i, s.Name, kerr.ErrPayloadTooLarge, len(p.Payload), maxPayload)
		}
		if seen[s.Name] {
			return nil, kerr.Invalid("Config.Schedules[%d]: schedule name %q used twice", i, s.Name)
		}
		seen[s.Name] = true
		out = append(out, p)
	}
	return out, nil
}

// StoredFunc reads the stored declarations of types (keel's declare
// package: Declarations.Stored).
type StoredFunc func(ctx context.Context, types []string) (map[string]*driver.TypeDefaults, error)

// ScheduleTask builds the insert of one task of schedule s with the
// idempotency key and meta given. Its type may be one this client does
// not know: the stored declaration's defaults (max attempts, timeout)
// apply, as for keel serve's enqueues; stored reads it.
func (p *Preparer) ScheduleTask(ctx context.Context, stored StoredFunc, s *driver.ScheduleRow, key string, meta map[string]string, now time.Time) (*driver.InsertParams, error) {
	var decl map[string]*driver.TypeDefaults
	if o, known := p.Types[s.Type]; !known || !o.Declared() {
		var err error
		if decl, err = stored(ctx, []string{s.Type}); err != nil {
			return nil, err
		}
	}
	set := func(o *Options) {
		o.Queue, o.Priority, o.IdemKey, o.Meta = Ptr(s.Queue), Ptr(s.Priority), Ptr(key), meta
	}
	ins, err := p.Prepare(Spec{Type: s.Type, Payload: json.RawMessage(s.Payload), Options: []func(*Options){set}}, now, decl, true)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: %w", s.Name, err)
	}
	return &ins, nil
}
