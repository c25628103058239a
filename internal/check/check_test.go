package check

import (
	"strings"
	"testing"
	"time"
)

func TestAlerts(t *testing.T) {
	ok := AlertRules{DeadPerHour: -1, FailureRatio: 0.5, FailureMinAttempts: 1, FailureWindow: time.Minute}
	var got []string
	Alerts(ok, func(f, p string) { got = append(got, f+" "+p) })
	if len(got) != 0 {
		t.Fatalf("valid rules refused: %v", got)
	}
	bad := AlertRules{DeadPerHour: -2, OldestReadyAge: -time.Second, FailureRatio: 0.5, FailureWindow: 2 * time.Hour}
	Alerts(bad, func(f, p string) { got = append(got, f+" "+p) })
	want := []string{`dead_per_hour must be -1 (off) or more, got -2`, `oldest_ready_age must not be negative (0 turns the rule off), got "-1s"`,
		`failure_min_attempts must be at least 1, got 0`, `failure_window must be in 1m..1h (the history keeps minutes; stats read the last hour), got "2h"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSettingDurations(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Millisecond: "", 168 * time.Hour: "", 0: `must be in 1ms..168h, got "0s"`, time.Nanosecond: `must be in 1ms..168h, got "1ns"`,
		1500 * time.Microsecond: `must be a whole number of milliseconds (settings are stored in ms), got "1.5ms"`,
		169 * time.Hour:         `must be in 1ms..168h, got "169h"`, 90 * time.Minute: "",
	} {
		got := ""
		Backoff("backoff_base", d, func(f, p string) { got = p })
		if got != want {
			t.Errorf("Backoff(%v): %q, want %q", d, got, want)
		}
	}
	got := ""
	Timeout("timeout", 25*time.Hour, func(f, p string) { got = f + " " + p })
	if got != `timeout must be in 1ms..24h, got "25h"` {
		t.Errorf("Timeout(25h): %q", got)
	}
}
