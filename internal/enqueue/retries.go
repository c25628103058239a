package enqueue

import "github.com/keelq/keel/internal/backoff"

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
