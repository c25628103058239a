package enqueue

import (
	"fmt"

	"github.com/keelq/keel/driver"
)

// Registration checks the registration of taskType by fn (Handle or
// Declare) with opts and returns the type's defaults; dup says the type
// is registered already. The error's text is what fn panics with: a
// registration is the program's, not its input's.
func Registration[F ~func(*Options)](fn, taskType string, dup bool, opts []F) (Options, error) {
	fail := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf(format, args...)
	}
	if !driver.ValidName(taskType) {
		return fail("keel: %s: invalid task type %q", fn, taskType)
	}
	if ReservedType(taskType) {
		return fail("keel: %s: task type %q: names starting with %q are reserved for keel's own tasks", fn, taskType, KeelTypePrefix)
	}
	if dup {
		return fail("keel: %s: task type %q registered twice", fn, taskType)
	}
	o := Merge(Options{}, opts)
	if o.UniqueBy != nil || o.IdemKey != nil || o.RunAt != nil || o.Delay != nil || o.Meta != nil || o.Sequence != nil || o.SkipDead {
		return fail("keel: %s(%q): UniqueBy, IdempotencyKey, RunAt, Delay, Meta and Sequence apply to single tasks only", fn, taskType)
	}
	if err := o.Validate(); err != nil {
		return fail("keel: %s(%q): %v", fn, taskType, err)
	}
	if o.OnDead != nil && *o.OnDead == taskType {
		return fail("keel: %s(%q): OnDead names the type itself", fn, taskType)
	}
	return o, nil
}
