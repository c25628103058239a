// Package outcome holds the error types with which a handler asks for
// something other than a plain retry: the user API builds them
// (keel.Permanent, keel.RetryAfter, keel.Snooze) and the engine classifies
// them. It is a leaf package, so both sides import it without a cycle.
package outcome

import (
	"errors"
	"fmt"
	"time"
)

// Permanent marks an error not worth retrying: the task is dead-lettered.
type Permanent struct{ Err error }

func (e *Permanent) Error() string { return "permanent: " + errString(e.Err) }
func (e *Permanent) Unwrap() error { return e.Err }

// RetryAfter fails the attempt like Err but asks for Delay instead of the
// backoff before the next attempt.
type RetryAfter struct {
	Err   error
	Delay time.Duration
}

func (e *RetryAfter) Error() string { return errString(e.Err) }
func (e *RetryAfter) Unwrap() error { return e.Err }

// Snooze reschedules the task Delay ahead without using an attempt.
type Snooze struct{ Delay time.Duration }

func (e *Snooze) Error() string { return fmt.Sprintf("snoozed for %v", e.Delay) }

// AsPermanent reports whether err wraps a Permanent.
func AsPermanent(err error) bool {
	var p *Permanent
	return errors.As(err, &p)
}

// AsRetryAfter returns the delay err asks for when it wraps a RetryAfter
// (negative delays count as 0).
func AsRetryAfter(err error) (time.Duration, bool) {
	var r *RetryAfter
	if !errors.As(err, &r) {
		return 0, false
	}
	return max(r.Delay, 0), true
}

// AsSnooze returns the delay err asks for when it wraps a Snooze.
func AsSnooze(err error) (time.Duration, bool) {
	var s *Snooze
	if !errors.As(err, &s) {
		return 0, false
	}
	return s.Delay, true
}

// IsTimeout reports whether err says it is a timeout (net.Error,
// context.DeadlineExceeded and os.ErrDeadlineExceeded do), so an outbound
// call that timed out is recorded with outcome timeout, not error.
func IsTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
