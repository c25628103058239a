package main

import (
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/server"
)

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0s",
		30 * time.Microsecond:   "<0.1ms",
		400 * time.Microsecond:  "0.4ms",
		440 * time.Microsecond:  "0.4ms",
		960 * time.Microsecond:  "1ms",
		999 * time.Microsecond:  "1ms",
		time.Millisecond:        "1ms",
		850 * time.Millisecond:  "850ms",
		3210 * time.Millisecond: "3.2s",
		250 * time.Second:       "4m10s",
		-400 * time.Microsecond: "-0.4ms",
	} {
		if got := short(d); got != want {
			t.Errorf("short(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestInspectSubMillisecondAttempt: an attempt shorter than a millisecond
// is not shown as taking 0s.
func TestInspectSubMillisecondAttempt(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	task := server.Task{
		ID: 7, Type: "email", Queue: "default", State: "pending", Attempt: 1, MaxAttempts: 4, RunAt: start.Add(time.Second),
		CreatedAt: start,
		Errors:    []server.AttemptError{{Attempt: 1, Node: "n1", Start: start, End: start.Add(400 * time.Microsecond), Outcome: "error", Error: "boom"}},
	}
	var out strings.Builder
	printTimeline(&out, task)
	if !strings.Contains(out.String(), "attempt 1 on n1: failed after 0.4ms") {
		t.Fatalf("timeline:\n%s", out.String())
	}
}
