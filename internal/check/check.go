// Package check holds the rules for settings that more than one door
// accepts: the library (Client.SetAlertRules, Client.UpdateType), the HTTP
// API and `keel config check` call the same functions, so a value one of
// them refuses none of them stores.
package check

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Bad reports one invalid field: its name as keel.toml and the API write
// it ("dead_per_hour") and what is wrong with the value sent ("must be -1
// (off) or more, got -2").
type Bad func(field, problem string)

// AlertRules are the alert rules' checked fields (keel.AlertRules).
type AlertRules struct {
	DeadPerHour        int
	OldestReadyAge     time.Duration
	FailureRatio       float64
	FailureMinAttempts int
	FailureWindow      time.Duration
}

// Alerts reports every invalid field of r.
func Alerts(r AlertRules, bad Bad) {
	if r.DeadPerHour < -1 {
		bad("dead_per_hour", fmt.Sprintf("must be -1 (off) or more, got %d", r.DeadPerHour))
	}
	if r.OldestReadyAge < 0 {
		bad("oldest_ready_age", fmt.Sprintf("must not be negative (0 turns the rule off), got %s", Duration(r.OldestReadyAge)))
	}
	if r.FailureRatio < 0 || r.FailureRatio >= 1 || math.IsNaN(r.FailureRatio) {
		bad("failure_ratio", fmt.Sprintf("must be in [0, 1) (0 turns the rule off), got %v", r.FailureRatio))
	}
	if r.FailureRatio > 0 {
		if r.FailureMinAttempts < 1 {
			bad("failure_min_attempts", fmt.Sprintf("must be at least 1, got %d", r.FailureMinAttempts))
		}
		if r.FailureWindow < time.Minute || r.FailureWindow > time.Hour {
			bad("failure_window", fmt.Sprintf("must be in 1m..1h (the history keeps minutes; stats read the last hour), got %s", Duration(r.FailureWindow)))
		}
	}
}

// The longest timeout and backoff a task type's setting takes.
const (
	MaxTimeout = 24 * time.Hour
	MaxBackoff = 7 * 24 * time.Hour
)

// Timeout reports a task type's timeout (field) outside 1ms..24h or not
// storable as sent (see setting).
func Timeout(field string, d time.Duration, bad Bad) { setting(field, d, MaxTimeout, bad) }

// Backoff reports a task type's backoff base or max (field) outside
// 1ms..168h or not storable as sent (see setting).
func Backoff(field string, d time.Duration, bad Bad) { setting(field, d, MaxBackoff, bad) }

// setting reports a duration setting outside 1ms..most, or one that is
// not a whole number of milliseconds: settings are stored in ms, and
// "1ns" must not quietly become 1ms.
func setting(field string, d, most time.Duration, bad Bad) {
	switch {
	case d < time.Millisecond || d > most:
		bad(field, fmt.Sprintf("must be in 1ms..%s, got %s", strings.Trim(Duration(most), `"`), Duration(d)))
	case d%time.Millisecond != 0:
		bad(field, fmt.Sprintf("must be a whole number of milliseconds (settings are stored in ms), got %s", Duration(d)))
	}
}

// Duration quotes d as it is usually written, without trailing zero
// units: "2h", "1h30m", "90s", "1ns".
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return `"` + s + `"`
}
