package keel

import (
	"time"

	"github.com/keelq/keel/internal/outcome"
)

// IsPermanent reports whether err (or an error it wraps) was made with
// Permanent, so a worker dead-letters the task at once.
func IsPermanent(err error) bool {
	return outcome.AsPermanent(err)
}

// RetryDelay reports the delay err asks for when it (or an error it wraps)
// was made with RetryAfter. A worker waits that long instead of the backoff
// before the next attempt (negative delays count as 0).
func RetryDelay(err error) (time.Duration, bool) {
	return outcome.AsRetryAfter(err)
}

// SnoozeDelay reports the delay err asks for when it (or an error it wraps)
// was made with Snooze. A worker reschedules the task that far ahead
// without using an attempt. A snooze takes precedence over Permanent and
// RetryAfter when an error wraps several of them, as it does in the worker.
func SnoozeDelay(err error) (time.Duration, bool) {
	return outcome.AsSnooze(err)
}
