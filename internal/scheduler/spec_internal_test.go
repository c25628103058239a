package scheduler

import (
	"slices"
	"testing"
	"time"
)

// TestLatestDue: the latest due tick and whether more came due, for cron
// specs (searched back from now) and @every (counted from the last tick).
func TestLatestDue(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		spec, zone, last, now, want string
		many                        bool
	}{
		{"@every 1m", "UTC", "2031-01-01T00:00:00Z", "2031-01-01T00:00:59Z", "", false},
		{"@every 1m", "UTC", "2031-01-01T00:00:00Z", "2031-01-01T00:01:00Z", "2031-01-01T00:01:00Z", false},
		{"@every 1m", "UTC", "2031-01-01T00:00:07Z", "2031-01-01T05:00:00Z", "2031-01-01T04:59:07Z", true},
		{"*/5 * * * *", "UTC", "2031-01-01T00:00:00Z", "2031-01-01T00:07:00Z", "2031-01-01T00:05:00Z", false},
		{"*/5 * * * *", "UTC", "2031-01-01T00:00:00Z", "2031-03-01T00:07:00Z", "2031-03-01T00:05:00Z", true},
		{"0 3 1 1 *", "UTC", "2031-01-01T00:00:00Z", "2033-06-01T00:00:00Z", "2033-01-01T03:00:00Z", true},
		// 09:00 in Berlin is 08:00 UTC in winter, 07:00 UTC in summer.
		{"0 9 * * *", "Europe/Berlin", "2031-01-01T00:00:00Z", "2031-01-01T08:00:00Z", "2031-01-01T08:00:00Z", false},
		{"0 9 * * *", "Europe/Berlin", "2031-07-01T00:00:00Z", "2031-07-03T07:30:00Z", "2031-07-03T07:00:00Z", true},
		{"*/10 * * * * *", "UTC", "2031-01-01T00:00:00Z", "2031-01-01T00:00:25Z", "2031-01-01T00:00:20Z", true},
	}
	for _, c := range cases {
		sched, _, err := Parse(c.spec, c.zone)
		if err != nil {
			t.Fatal(err)
		}
		got, many := latestDue(sched, at(c.last), at(c.now))
		var want time.Time
		if c.want != "" {
			want = at(c.want)
		}
		if !got.Equal(want) || many != c.many {
			t.Errorf("%s in %s from %s at %s: %v, %v; want %v, %v", c.spec, c.zone, c.last, c.now, got, many, want, c.many)
		}
	}
}

// TestNextAfter: @every counts from the last tick; cron specs from now.
func TestNextAfter(t *testing.T) {
	last := time.Date(2031, 1, 1, 0, 0, 7, 0, time.UTC)
	every, _, _ := Parse("@every 1m", "UTC")
	if got, want := nextAfter(every, last, last.Add(150*time.Second)), last.Add(3*time.Minute); !got.Equal(want) {
		t.Errorf("@every: %v, want %v", got, want)
	}
	if got, want := nextAfter(every, last, last.Add(-time.Hour)), last.Add(time.Minute); !got.Equal(want) {
		t.Errorf("@every before its last tick: %v, want %v", got, want)
	}
	hourly, _, _ := Parse("@hourly", "UTC")
	if got, want := nextAfter(hourly, last, last.Add(150*time.Minute)), time.Date(2031, 1, 1, 3, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("@hourly: %v, want %v", got, want)
	}
}

// TestScheduleDST pins robfig/cron's daylight-saving behaviour, which the
// schedules guide (docs/schedules.md) describes: 02:30 in Berlin is skipped on the spring-forward day
// and comes twice (two instants, two ticks) on the fall-back day.
func TestScheduleDST(t *testing.T) {
	s, loc, err := Parse("30 2 * * *", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	next := func(from time.Time, n int) []string {
		var out []string
		for range n {
			from = s.Next(from)
			out = append(out, from.UTC().Format(time.RFC3339))
		}
		return out
	}
	if got, want := next(time.Date(2031, 3, 29, 12, 0, 0, 0, loc), 2), []string{"2031-03-31T00:30:00Z", "2031-04-01T00:30:00Z"}; !slices.Equal(got, want) {
		t.Errorf("spring forward: %v, want %v (no 02:30 on March 30)", got, want)
	}
	if got, want := next(time.Date(2031, 10, 25, 12, 0, 0, 0, loc), 3), []string{"2031-10-26T00:30:00Z", "2031-10-26T01:30:00Z", "2031-10-27T01:30:00Z"}; !slices.Equal(got, want) {
		t.Errorf("fall back: %v, want %v (02:30 CEST and 02:30 CET)", got, want)
	}
}
