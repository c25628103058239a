package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/server"
)

// TestBrakeCommands: keel brakes lists the brakes, keel type list shows a
// type's brake, keel enqueue and keel inspect say when an open brake's
// next probe is due, and keel brake close closes an open one (and refuses
// a closed one).
func TestBrakeCommands(t *testing.T) {
	s := newAPI(t, serverOpts{})
	if out := s.keel(t, "brakes"); !strings.Contains(out, "no brake ever opened") {
		t.Fatalf("brakes: %q", out)
	}
	if err := s.keelErr(t, "brake", "close", "email"); !strings.Contains(err.Error(), "HTTP 409") || !strings.Contains(err.Error(), "is not open") {
		t.Fatalf("close a closed brake: %v", err)
	}
	now := time.Now()
	if ok, err := s.drv.(driver.Braker).ChangeBrake(t.Context(), driver.BrakeChange{To: driver.BrakeRow{Type: "email", State: driver.BrakeOpen,
		OpenedAt: now, Until: now.Add(time.Minute), Ratio: 0.75, Attempts: 20, Reason: "15 of the last 20 attempts failed"},
		From: []driver.BrakeState{driver.BrakeClosed}, Now: now}); err != nil || !ok {
		t.Fatalf("open: %v %v", ok, err)
	}
	out := s.keel(t, "brakes")
	if !regexp.MustCompile(`(?m)^email\s+open\s+75%\s+20\s+\d\d:\d\d:\d\d\s+-\s+15 of the last 20 attempts failed$`).MatchString(out) {
		t.Fatalf("brakes:\n%s", out)
	}
	if bl := decode[server.BrakeList](t, s.keel(t, "brakes", "--json")); len(bl.Brakes) != 1 || bl.Brakes[0].State != "open" {
		t.Fatalf("brakes --json: %+v", bl)
	}
	// A waiting task of the type says when the brake's next probe is due.
	out = s.keel(t, "enqueue", "email", "{}")
	if !regexp.MustCompile(`^enqueued task (\d+): .*waits: its type's automatic brake is open, next probe in (5\d(\.\d)?s|1m0s) \(keel brakes\)\n$`).MatchString(out) {
		t.Fatalf("enqueue: %q", out)
	}
	id := regexp.MustCompile(`\d+`).FindString(out)
	if out := s.keel(t, "inspect", id); !strings.Contains(out, stampMilli(now.Add(time.Minute).Truncate(time.Millisecond))+"  next probe due: the type's automatic brake is open until then (keel brakes)\n") {
		t.Fatalf("inspect:\n%s", out)
	}
	if out := s.keel(t, "type", "list"); !regexp.MustCompile(`(?m)^email\s.*\sopen\s+-$`).MatchString(out) {
		t.Fatalf("type list:\n%s", out)
	}
	if out := s.keel(t, "brake", "close", "email"); out != "brake of type email closed: its tasks are claimed again\n" {
		t.Fatalf("brake close: %q", out)
	}
	if out := s.keel(t, "brakes"); !regexp.MustCompile(`(?m)^email\s+closed\s+-\s+-\s`).MatchString(out) {
		t.Fatalf("brakes after close:\n%s", out)
	}
	if out := s.keel(t, "brake", "set", "email", "--window", "10", "--threshold", "0.8", "--cooldown", "1m"); out != "brake of type email: closed, window 10, threshold 0.8, cooldown 1m\n" {
		t.Fatalf("brake set: %q", out)
	}
	if out := s.keel(t, "brake", "set", "email", "--off"); out != "brake of type email: closed, window off, threshold -, cooldown -\n" {
		t.Fatalf("brake set --off: %q", out)
	}
	if err := s.keelErr(t, "brake", "set", "email", "--threshold", "2"); !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("brake set bad threshold: %v", err)
	}
	if err := s.keelErr(t, "brake", "set", "email", "--cooldown", "soon"); !strings.Contains(err.Error(), "--cooldown") {
		t.Fatalf("brake set bad cooldown: %v", err)
	}
}
