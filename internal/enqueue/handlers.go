package enqueue

import "github.com/keelq/keel/internal/backoff"

// MustRegister is Registration for Handle and Declare, which panic with
// the error's text: a bad registration is a programming error.
func MustRegister[F ~func(*Options)](fn, taskType string, dup bool, opts []F) Options {
	defaults, err := Registration(fn, taskType, dup, opts)
	if err != nil {
		panic(err.Error())
	}
	return defaults
}

// Retries returns the retry policies and snooze bounds of the types whose
// registered defaults set them (the engine's TypeBackoff and
// TypeMaxSnoozes); both maps are empty, never nil, when none does.
func Retries(types map[string]Options) (map[string]backoff.Policy, map[string]int) {
	policies, snoozes := map[string]backoff.Policy{}, map[string]int{}
	for t, o := range types {
		if o.Backoff != nil {
			policies[t] = *o.Backoff
		}
		if o.MaxSnoozes != nil {
			snoozes[t] = *o.MaxSnoozes
		}
	}
	return policies, snoozes
}
