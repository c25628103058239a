package postgres

import (
	"strings"
	"testing"
	"time"
)

// TestMaintainPolicy: Maintain leaves an enabled autovacuum to its work
// until it is 5 minutes late, vacuums at once where autovacuum is off,
// never while a vacuum runs, and never below the threshold.
func TestMaintainPolicy(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var d Driver
	dead := tableHealth{live: 1_000_000, dead: 2_000_000, autovacuum: true}
	steps := []struct {
		h      tableHealth
		at     time.Duration
		vacuum bool
		reason string
	}{
		{tableHealth{live: 1_000_000, dead: 10_999, autovacuum: false}, 0, false, "below the threshold"},
		{dead, 0, false, "autovacuum is on"},
		{dead, 4 * time.Minute, false, "autovacuum is on"},
		{dead, 5 * time.Minute, true, "autovacuum left the dead rows past the threshold for 5m0s"},
		// An autovacuum ran (a later last vacuum): the wait starts again.
		{tableHealth{live: 1_000_000, dead: 2_000_000, autovacuum: true, lastVacuum: t0.Add(6 * time.Minute)}, 7 * time.Minute, false, "autovacuum is on"},
		{tableHealth{live: 1_000_000, dead: 2_000_000, autovacuum: false, vacuuming: true}, 8 * time.Minute, false, "a vacuum of the table is running"},
		{tableHealth{live: 1_000_000, dead: 11_000, autovacuum: false}, 8 * time.Minute, true, "autovacuum is off"},
	}
	for i, s := range steps {
		r, vacuum := d.decide(s.h, t0.Add(s.at), true)
		if vacuum != s.vacuum || !strings.Contains(r.Reason, s.reason) || r.Threshold != 11_000 {
			t.Errorf("step %d: vacuum %v, %+v; want vacuum %v, reason %q, threshold 11000", i, vacuum, r, s.vacuum, s.reason)
		}
	}
}

// TestTableAutovacuum reads the table's autovacuum_enabled reloption.
func TestTableAutovacuum(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		opts []string
		want bool
	}{
		{nil, true},
		{[]string{"autovacuum_vacuum_scale_factor=0.01"}, true},
		{[]string{"autovacuum_enabled=false"}, false},
		{[]string{"autovacuum_vacuum_scale_factor=0.01", "autovacuum_enabled=off"}, false},
		{[]string{"autovacuum_enabled=0"}, false},
		{[]string{"autovacuum_enabled=true"}, true},
		{[]string{"autovacuum_enabled=on"}, true},
	} {
		if got := tableAutovacuum(c.opts); got != c.want {
			t.Errorf("%v: %v, want %v", c.opts, got, c.want)
		}
	}
}
