package enqueue

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/scheduler"
)

// DefaultQueue is the queue of a task whose options and type name none
// (keel.DefaultQueue).
const DefaultQueue = "default"

// Spec is one task as the caller describes it.
type Spec struct {
	Type    string
	Payload any
	Options []func(*Options)
}

// Preparer validates tasks and turns them into insert parameters.
type Preparer struct {
	// Types are the types this client knows (handled or declared) and
	// their registered defaults. It is read, never written.
	Types map[string]Options
	// MaxAttempts and Timeout are the defaults of a task whose options,
	// registration and stored declaration set none.
	MaxAttempts int
	Timeout     time.Duration
	// MaxPayloadBytes bounds the encoded payload.
	MaxPayloadBytes int
	// AnyType lets a caller's enqueue name a type absent from Types.
	AnyType bool
}

// Undeclared returns the valid types of specs that may be enqueued but
// have no registered defaults: their stored declarations apply, and the
// caller reads them for Prepare.
func (p *Preparer) Undeclared(specs []Spec) []string {
	var out []string
	for _, j := range specs {
		o, known := p.Types[j.Type]
		if ((known && !o.Declared()) || (!known && p.AnyType && driver.ValidName(j.Type))) && !slices.Contains(out, j.Type) {
			out = append(out, j.Type)
		}
	}
	return out
}

// PrepareEnqueue is Prepare for a caller's enqueue: AnyType applies, and
// an idempotency key may not take the form of a schedule's tick.
func (p *Preparer) PrepareEnqueue(j Spec, now time.Time, stored map[string]*driver.TypeDefaults) (driver.InsertParams, error) {
	if o := Merge(Options{}, j.Options); o.IdemKey != nil && strings.HasPrefix(*o.IdemKey, scheduler.KeyPrefix) {
		// A held tick key would fail the schedule's tick until released.
		return driver.InsertParams{}, kerr.Invalid("idempotency key %q: keys starting with %q are reserved for schedules' ticks", *o.IdemKey, scheduler.KeyPrefix)
	}
	return p.Prepare(j, now, stored, p.AnyType)
}

// Prepare validates one task and turns it into insert parameters. Its
// defaults are the registration of its type in Types or, when that sets
// none, the type's stored declaration (stored[j.Type]; nil: none), then
// the Preparer's own. anyType accepts a type absent from Types (a
// schedule's task, which another process runs). now is the enqueue's
// time: the run time when no option sets one.
func (p *Preparer) Prepare(j Spec, now time.Time, stored map[string]*driver.TypeDefaults, anyType bool) (driver.InsertParams, error) {
	invalid := kerr.Invalid
	if !driver.ValidName(j.Type) {
		return driver.InsertParams{}, invalid("invalid task type %q: use 1-128 letters, digits, '_', '.', ':' or '-'", j.Type)
	}
	if ReservedType(j.Type) {
		return driver.InsertParams{}, invalid("task type %q: names starting with %q are reserved for keel's own tasks", j.Type, KeelTypePrefix)
	}
	defaults, known := p.Types[j.Type]
	if !known && !anyType {
		return driver.InsertParams{}, fmt.Errorf("%w %q: register a handler or declare it in Config.Types", kerr.ErrUnknownType, j.Type)
	}
	if !defaults.Declared() {
		defaults = StoredOptions(stored[j.Type])
	}
	switch call := Merge(Options{}, j.Options); {
	case call.Backoff != nil:
		return driver.InsertParams{}, invalid("Backoff is a per-type option: pass it to Handle, not Enqueue")
	case call.MaxSnoozes != nil:
		return driver.InsertParams{}, invalid("MaxSnoozes is a per-type option: pass it to Handle, not Enqueue")
	case call.OnDead != nil:
		return driver.InsertParams{}, invalid("OnDead is a per-type option: pass it to Handle or Declare, not Enqueue")
	case call.Brake != nil:
		return driver.InsertParams{}, invalid("Brake is a per-type option: pass it to Handle or Declare, not Enqueue")
	}
	o := Merge(defaults, j.Options)
	if err := o.Validate(); err != nil {
		return driver.InsertParams{}, err
	}
	if err := checkStored(o); err != nil {
		return driver.InsertParams{}, err
	}
	raw, err := encodePayload(j.Payload, p.MaxPayloadBytes)
	if err != nil {
		return driver.InsertParams{}, err
	}
	canon, err := digest.Canonical(raw)
	if err != nil {
		return driver.InsertParams{}, invalid("%v", err)
	}
	ins := driver.InsertParams{
		Queue:       DefaultQueue,
		Type:        j.Type,
		Payload:     canon,
		MaxAttempts: p.MaxAttempts,
		RunAt:       now,
		Timeout:     p.Timeout,
		Now:         now,
		// The digest covers the type too, so one explicit key reused for
		// another type is a conflict, not a duplicate.
		PayloadDigest: digest.Sum(append([]byte(j.Type+"\x00"), canon...)),
	}
	if o.Queue != nil {
		ins.Queue = *o.Queue
	}
	if o.Priority != nil {
		ins.Priority = *o.Priority
	}
	if o.MaxAttempts != nil {
		ins.MaxAttempts = *o.MaxAttempts
	}
	if o.Timeout != nil {
		ins.Timeout = *o.Timeout
	}
	if o.RunAt != nil {
		ins.RunAt = *o.RunAt
	}
	if o.Delay != nil {
		ins.RunAt = now.Add(*o.Delay)
		if err := CheckRunAt(ins.RunAt, " (now plus delay "+o.Delay.String()+")"); err != nil {
			return driver.InsertParams{}, err
		}
	}
	switch {
	case o.UniqueBy != nil:
		ins.IdemKey = digest.UniqueKey(j.Type, *o.UniqueBy, canon)
	case o.IdemKey != nil:
		ins.IdemKey = digest.ExplicitKey(*o.IdemKey)
	}
	if len(o.DependsOn) > 0 {
		ins.DependsOn = slices.Compact(slices.Sorted(slices.Values(o.DependsOn)))
	}
	if o.Sequence != nil {
		ins.Sequence, ins.SkipDead = *o.Sequence, o.SkipDead
	}
	if o.Meta != nil {
		if ins.Meta, err = json.Marshal(o.Meta); err != nil {
			return driver.InsertParams{}, invalid("meta: %v", err)
		}
	}
	return ins, nil
}
