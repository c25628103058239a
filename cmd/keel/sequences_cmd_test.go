package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/server"
)

// TestSequencesCommand: keel enqueue --sequence puts the key's second task
// on hold and says so; a bad --sequence-on-dead is refused; keel sequences
// lists a key whose first member died, and says how to let the rest run.
func TestSequencesCommand(t *testing.T) {
	s := newAPI(t, serverOpts{})
	if out := s.keel(t, "sequences"); !strings.Contains(out, "no sequence is held by a dead member") {
		t.Fatalf("sequences: %q", out)
	}
	first := enqueuedID(t, s.keel(t, "enqueue", "email", `{"n":1}`, "--sequence", "customer-7"))
	out := s.keel(t, "enqueue", "email", `{"n":2}`, "--sequence", "customer-7", "--sequence-on-dead", "hold")
	if !strings.Contains(out, "held: waits for the task before it in sequence customer-7 to finish") {
		t.Fatalf("enqueue of the second member: %q", out)
	}
	if err := s.keelErr(t, "enqueue", "email", `{}`, "--sequence", "k", "--sequence-on-dead", "maybe"); err == nil ||
		!strings.Contains(err.Error(), `must be "hold" or "skip"`) {
		t.Fatalf("bad --sequence-on-dead: %v", err)
	}
	now := time.Now()
	claimed, err := s.drv.Claim(t.Context(), driver.ClaimParams{Queue: "default", Limit: 5, Owner: "cli-test", Now: now,
		LeaseExpiresAt: now.Add(time.Minute)})
	if err != nil || len(claimed) != 1 || claimed[0].ID != first {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	if _, err := s.drv.Finish(t.Context(), driver.FinishParams{Owner: "cli-test", Now: now, Transitions: []driver.Transition{{
		ID: first, Fence: claimed[0].Fence, State: driver.StateDead, Task: &claimed[0],
		Error: &driver.AttemptError{Attempt: 1, Start: now, End: now, Outcome: driver.OutcomePermanent, Error: "bounced"}}}}); err != nil {
		t.Fatal(err)
	}
	out = s.keel(t, "sequences")
	if !regexp.MustCompile(`(?m)^customer-7\s+`+strconv.FormatInt(first, 10)+`\s+.*\s1$`).MatchString(out) ||
		!strings.Contains(out, "keel retry <id>") {
		t.Fatalf("sequences:\n%s", out)
	}
	if l := decode[server.BlockedSequenceList](t, s.keel(t, "sequences", "--json")); len(l.Sequences) != 1 || l.Sequences[0].DeadTask != first {
		t.Fatalf("sequences --json: %+v", l)
	}
}
