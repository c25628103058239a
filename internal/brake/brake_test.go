package brake

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

var (
	first   = Outcome{Failed: driver.OutcomeError, Attempt: 1}
	retry   = Outcome{Failed: driver.OutcomeError, Attempt: 2}
	success = Outcome{Succeeded: true, Attempt: 1}
)

func TestEvidenceOfEachOutcome(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Outcome
		want Evidence
	}{
		{"success", success, Success},
		{"success after retries", Outcome{Succeeded: true, Attempt: 7}, Success},
		{"first attempt's error", first, Failure},
		{"first attempt's timeout", Outcome{Failed: driver.OutcomeTimeout, Attempt: 1}, Failure},
		{"a retry's error", retry, None},
		{"permanent error (an HTTP 4xx)", Outcome{Failed: driver.OutcomePermanent, Attempt: 1}, None},
		{"panic", Outcome{Failed: driver.OutcomePanic, Attempt: 1}, None},
		{"lease expired", Outcome{Failed: driver.OutcomeLeaseExpired, Attempt: 1}, None},
		{"cancelled", Outcome{Failed: driver.OutcomeCancelled, Attempt: 1}, None},
		{"snoozed too often", Outcome{Failed: driver.OutcomeSnoozed, Attempt: 1}, None},
		{"released at stop", Outcome{Attempt: 1}, None},
	} {
		if got := Of(c.o); got != c.want {
			t.Errorf("%s: evidence %d, want %d", c.name, got, c.want)
		}
	}
}

func TestWindowHoldsExactlyTheLastN(t *testing.T) {
	w := NewWindow(10)
	for range 10 {
		w.Add(false)
	}
	for i := range 9 {
		w.Add(true)
		if f, n := w.Counts(); f != i+1 || n != 10 {
			t.Fatalf("after %d failures: %d of %d", i+1, f, n)
		}
	}
	w.Resize(4) // keeps the newest four: all failures
	if f, n := w.Counts(); f != 4 || n != 4 {
		t.Fatalf("resized to 4: %d of %d", f, n)
	}
	w.Resize(8)
	w.Add(false)
	if f, n := w.Counts(); f != 4 || n != 5 || w.Full() {
		t.Fatalf("resized to 8, one success more: %d of %d, full %v", f, n, w.Full())
	}
}

// A window of N opens the brake on the Nth piece of evidence, not before
// and not later.
func TestOpensOnTheNthPiece(t *testing.T) {
	j := NewType(Config{Window: 10, Threshold: 0.8})
	for i := 1; i <= 10; i++ {
		a := j.Closed(Of(first))
		if (a == Open) != (i == 10) {
			t.Fatalf("failure %d: action %d", i, a)
		}
	}
}

// Poison tasks (5 % of tasks, each retried 25 times) among successes: the
// retries add nothing, so the window never comes near the threshold.
func TestPoisonRetriesNeverOpen(t *testing.T) {
	j := NewType(Config{Window: 20, Threshold: 0.8, Cooldown: time.Second})
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 1000 {
		if i%20 == 0 {
			for attempt := 1; attempt <= 25; attempt++ {
				if j.Closed(Of(Outcome{Failed: driver.OutcomeError, Attempt: attempt})) != Keep {
					t.Fatalf("poison task %d attempt %d opened the brake", i, attempt)
				}
			}
			continue
		}
		if r.IntN(3) == 0 { // retries of poison tasks arrive between the successes
			j.Closed(Of(retry))
		}
		if j.Closed(Of(success)) != Keep {
			t.Fatalf("task %d opened the brake", i)
		}
	}
	if f, n := j.Window().Counts(); f > 2 || n != 20 {
		t.Fatalf("window at the end: %d of %d failed", f, n)
	}
}

// Half open: the first probes (a few tasks) all failing reopen the brake;
// successes widen the trickle, earn fresh tasks places, and close the
// brake once fresh tasks succeed and the successes outweigh the failures.
func TestTrickleWidensAndCloses(t *testing.T) {
	now := time.Unix(1e9, 0)
	j := NewType(Config{Window: 20, Threshold: 0.8, Cooldown: time.Second})
	for range 20 {
		j.Closed(Of(first))
	}
	j.HalfOpened()
	if j.Room() != InitialWidth || j.FreshRoom(false) != InitialWidth {
		t.Fatalf("room %d, fresh room %d, want %d each", j.Room(), j.FreshRoom(false), InitialWidth)
	}
	j.ProbeStarted(false)
	j.ProbeStarted(true)
	if j.Room() != 0 || j.FreshRoom(true) != 0 {
		t.Fatalf("room %d, fresh room %d with the trickle full", j.Room(), j.FreshRoom(true))
	}
	if a := j.Probe(retry, now); a != Keep {
		t.Fatalf("the first probe failing: action %d, want to wait for the others", a)
	}
	if a := j.Probe(first, now); a != Reopen {
		t.Fatalf("both probes failed: action %d, want reopen", a)
	}
	// Credits spent and nothing running: only a scout goes.
	j.HalfOpened()
	j.ProbeStarted(true)
	j.ProbeStarted(true)
	j.Probe(Outcome{Failed: driver.OutcomeCancelled, Attempt: 1}, now)
	j.Probe(Outcome{Failed: driver.OutcomeCancelled, Attempt: 1}, now)
	if j.FreshRoom(false) != 0 || j.FreshRoom(true) != 1 {
		t.Fatalf("fresh room %d without a scout, %d with, want 0 and 1", j.FreshRoom(false), j.FreshRoom(true))
	}
	j.HalfOpened()
	closedAfter := 0
	for i := 1; i <= 20; i++ {
		j.ProbeStarted(false)
		a := j.Probe(Outcome{Succeeded: true, Attempt: 1 + i%2}, now) // retries and fresh tasks
		if a == Close {
			closedAfter = i
			break
		}
		if want := InitialWidth + i; j.Room() != want {
			t.Fatalf("after %d successes: room %d, want %d", i, j.Room(), want)
		}
	}
	// 20 failures: the share falls below 0.4 once 13 successes replaced
	// 13 of them (7 of 20).
	if closedAfter != 13 {
		t.Fatalf("closed after %d successes, want 13", closedAfter)
	}
}

// Once successes turned the window, a fresh task's first failure goes in
// the window and the trickle goes on: a downstream that fails every
// task's first attempts but lets retries through is neither paused again
// nor let through fresh-first: the brake stays half open.
func TestTrickleGoesOnWhileRetriesSucceed(t *testing.T) {
	now := time.Unix(1e9, 0)
	j := NewType(Config{Window: 20, Threshold: 0.8, Cooldown: time.Second})
	for range 20 {
		j.Closed(Of(first))
	}
	j.HalfOpened()
	for range 6 {
		j.ProbeStarted(false)
		if a := j.Probe(Outcome{Succeeded: true, Attempt: 3}, now); a != Keep {
			t.Fatalf("action %d", a)
		}
	}
	for i := range 200 {
		j.ProbeStarted(false)
		var a Action
		switch i % 4 { // per task: a first failure, a failed retry, a success
		case 0:
			a = j.Probe(first, now)
		case 1, 3:
			a = j.Probe(retry, now)
		default:
			a = j.Probe(Outcome{Succeeded: true, Attempt: 3}, now)
		}
		if a != Keep {
			t.Fatalf("probe %d: action %d, share %.2f", i, a, j.Window().Share())
		}
	}
	if j.Room() < 50 {
		t.Fatalf("room %d after 50 successes", j.Room())
	}
	// A fresh task succeeds: the brake closes.
	for range 20 {
		j.ProbeStarted(false)
		if j.Probe(success, now) == Close {
			return
		}
	}
	t.Fatalf("fresh tasks succeeded and the brake stayed half open at a share of %.2f", j.Window().Share())
}

// A probe that ends without an outcome frees its place at once.
func TestProbeWithoutOutcomeFreesItsPlace(t *testing.T) {
	now := time.Unix(1e9, 0)
	j := NewType(Config{Window: 5, Threshold: 0.8})
	j.HalfOpened()
	for range InitialWidth {
		j.ProbeStarted(false)
	}
	if j.Room() != 0 {
		t.Fatalf("room %d with every probe running", j.Room())
	}
	if a := j.Probe(Outcome{Failed: driver.OutcomeCancelled, Attempt: 1}, now); a != Keep || j.Room() != 1 {
		t.Fatalf("cancelled probe: action %d, room %d", a, j.Room())
	}
}

// Once probes have succeeded, failures between the successes are
// expected; a cooldown with failures and no success reopens the brake.
func TestTrickleReopensAfterACooldownWithoutSuccess(t *testing.T) {
	now := time.Unix(1e9, 0)
	j := NewType(Config{Window: 20, Threshold: 0.8, Cooldown: time.Second})
	for range 20 {
		j.Closed(Of(first))
	}
	j.HalfOpened()
	j.ProbeStarted(false)
	j.Probe(Outcome{Succeeded: true, Attempt: 3}, now)
	for i := range 50 {
		now = now.Add(10 * time.Millisecond)
		j.ProbeStarted(true)
		if a := j.Probe(first, now); a != Keep {
			t.Fatalf("failure %d, %v after the success: action %d", i, time.Duration(i+1)*10*time.Millisecond, a)
		}
	}
	now = now.Add(SuccessMemory * time.Second)
	j.ProbeStarted(false)
	if a := j.Probe(retry, now); a != Reopen {
		t.Fatalf("a failure a cooldown after the last success, 51 in a row: action %d, want reopen", a)
	}
}
