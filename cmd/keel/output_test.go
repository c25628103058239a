package main

import (
	"encoding/json"
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

// TestArchivedTaskShown: keel status and keel inspect say a task is
// archived, and inspect no longer suggests requeueing an archived dead
// letter.
func TestArchivedTaskShown(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	finished, archived := start.Add(time.Second), start.Add(31*24*time.Hour)
	task := server.Task{
		ID: 7, Type: "email", Queue: "default", State: "dead", Attempt: 1, MaxAttempts: 1, RunAt: start,
		CreatedAt: start, FinishedAt: &finished, Archived: true, ArchivedAt: &archived,
	}
	if got := when(task); !strings.Contains(got, "finished "+stamp(finished)) || !strings.Contains(got, "archived "+stamp(archived)) {
		t.Fatalf("status: %q, want the finish and the archival", got)
	}
	var out strings.Builder
	printTimeline(&out, task)
	s := out.String()
	if !strings.Contains(s, "dead (archived)") || !strings.Contains(s, "archived after its retention") || strings.Contains(s, "keel retry") {
		t.Fatalf("timeline:\n%s", s)
	}
	task.Archived, task.ArchivedAt = false, nil
	if got := when(task); strings.Contains(got, "archived") {
		t.Fatalf("status of a live task: %q", got)
	}
}

// TestInspectShowsSteps: keel inspect lists a task's finished steps with
// their time, attempt and result.
func TestInspectShowsSteps(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	task := server.Task{
		ID: 7, Type: "report", Queue: "default", State: "running", Attempt: 2, MaxAttempts: 4, RunAt: start,
		CreatedAt: start, Steps: []server.Step{
			{Name: "fetch", Result: json.RawMessage(`{"rows":3}`), At: start.Add(time.Second), Attempt: 1},
			{Name: "render", Result: json.RawMessage(`"ok"`), At: start.Add(2 * time.Second), Attempt: 2},
		},
	}
	var out strings.Builder
	printTimeline(&out, task)
	s := out.String()
	for _, want := range []string{"steps (finished", stampMilli(start.Add(time.Second)) + "  fetch (attempt 1): {\"rows\":3}", "render (attempt 2): \"ok\""} {
		if !strings.Contains(s, want) {
			t.Fatalf("timeline lacks %q:\n%s", want, s)
		}
	}
	task.Steps = nil
	out.Reset()
	printTimeline(&out, task)
	if strings.Contains(out.String(), "steps") {
		t.Fatalf("a task without steps shows a steps section:\n%s", out.String())
	}
}
