package drivertest

import (
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

func testFencingAfterRescue(t *testing.T, e *env) {
	row := e.insert()
	t0 := e.clock.Now()
	e.claimOne("A", t0) // lease until t0+30s
	// Only the owner, with the current attempt, may finish.
	e.requireRejected("B", t0, everyTransition(row.ID, 1, t0))
	e.requireRejected("A", t0, everyTransition(row.ID, 2, t0))
	e.requireRejected("A", t0, everyTransition(row.ID, 0, t0))
	if got := e.get(row.ID); got.State != driver.StateRunning || got.LeaseOwner != "A" {
		t.Fatalf("rejected finishes changed the task: %s owner %q", got.State, got.LeaseOwner)
	}

	// Not expired: nothing to rescue (expiry is strictly after the lease).
	backoff := func(string, int) time.Duration { return 10 * time.Second }
	for _, at := range []time.Time{t0.Add(leaseTTL - time.Second), t0.Add(leaseTTL)} {
		rows, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: at, Limit: 100, Backoff: backoff, Node: "R"})
		if err != nil || len(rows) != 0 {
			t.Fatalf("rescue at %v before expiry: %v, %v", at.Sub(t0), ids(rows), err)
		}
	}

	// A vanished: its lease expires and the rescuer takes the task back.
	t1 := e.clock.Advance(leaseTTL + time.Second)
	rows, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: t1, Limit: 100, Backoff: backoff, Node: "R"})
	if err != nil {
		t.Fatalf("rescue: %v", err)
	}
	if len(rows) != 1 || rows[0].ID != row.ID {
		t.Fatalf("rescued %v, want [%d]", ids(rows), row.ID)
	}
	for _, r := range []*driver.TaskRow{&rows[0], e.get(row.ID)} {
		if r.State != driver.StatePending || r.Attempt != 1 || !r.RunAt.Equal(row.RunAt.Add(10*time.Second)) || r.LeaseOwner != "" {
			t.Fatalf("rescued: state %s attempt %d run_at %v owner %q", r.State, r.Attempt, r.RunAt, r.LeaseOwner)
		}
		if len(r.Errors) != 1 {
			t.Fatalf("rescued: %d errors, want 1", len(r.Errors))
		}
		ae := r.Errors[0]
		if ae.Outcome != driver.OutcomeLeaseExpired || ae.Attempt != 1 || ae.Node != "A" || !ae.Start.Equal(t0) || !ae.End.Equal(t1) || ae.Error == "" {
			t.Fatalf("rescue error entry %+v", ae)
		}
	}

	// B takes the task over.
	t2 := e.clock.Advance(10 * time.Second)
	if r := e.claimOne("B", t2); r.Attempt != 2 || r.LeaseOwner != "B" {
		t.Fatalf("B's claim: attempt %d owner %q", r.Attempt, r.LeaseOwner)
	}

	// A comes back: none of its writes apply, whatever attempt it names.
	e.requireRejected("A", t2, everyTransition(row.ID, 1, t2))
	e.requireRejected("A", t2, everyTransition(row.ID, 2, t2))
	if held, err := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "A", IDs: []int64{row.ID}, Now: t2, LeaseExpiresAt: t2.Add(time.Hour)}); err != nil || len(held) != 0 {
		t.Fatalf("stale owner's heartbeat: held %v, %v", held, err)
	}
	got := e.get(row.ID)
	if got.State != driver.StateRunning || got.LeaseOwner != "B" || got.Attempt != 2 || got.Result != nil || len(got.Errors) != 1 {
		t.Fatalf("stale writes changed the task: %s owner %q attempt %d result %s errors %d",
			got.State, got.LeaseOwner, got.Attempt, got.Result, len(got.Errors))
	}
	if applied := e.finish("B", t2, driver.Transition{ID: row.ID, Fence: 2, State: driver.StateSucceeded, Result: []byte(`"B"`)}); len(applied) != 1 {
		t.Fatal("the owner B could not finish")
	}
	if got := e.get(row.ID); got.State != driver.StateSucceeded || !jsonEqual(got.Result, []byte(`"B"`)) {
		t.Fatalf("final: %s result %s", got.State, got.Result)
	}
}

func testRescueLastAttemptDead(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
	t0 := e.clock.Now()
	e.claimOne("A", t0)
	t1 := e.clock.Advance(leaseTTL + time.Millisecond)
	rows, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: t1, Limit: 10, Backoff: func(string, int) time.Duration { return time.Second }, Node: "R"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("rescue: %v, %v", ids(rows), err)
	}
	got := e.get(row.ID)
	if got.State != driver.StateDead || !got.FinishedAt.Equal(t1) || len(got.Errors) != 1 || got.Errors[0].Outcome != driver.OutcomeLeaseExpired {
		t.Fatalf("a task that lost its lease on its last attempt must be dead: %s finished %v errors %+v", got.State, got.FinishedAt, got.Errors)
	}
	if r := e.claim("B", t1.Add(time.Hour), 10); len(r) != 0 {
		t.Fatal("dead task claimed")
	}
}

func testRescueLimit(t *testing.T, e *env) {
	for range 3 {
		e.insert()
	}
	t0 := e.clock.Now()
	e.claim("A", t0, 3)
	t1 := e.clock.Advance(leaseTTL + time.Second)
	p := driver.RescueParams{Now: t1, Limit: 2, Backoff: func(string, int) time.Duration { return 0 }, Node: "R"}
	first, err := e.drv.Rescue(e.ctx, p)
	if err != nil || len(first) != 2 {
		t.Fatalf("first rescue: %v, %v", ids(first), err)
	}
	second, err := e.drv.Rescue(e.ctx, p)
	if err != nil || len(second) != 1 {
		t.Fatalf("second rescue: %v, %v", ids(second), err)
	}
	if third, err := e.drv.Rescue(e.ctx, p); err != nil || len(third) != 0 {
		t.Fatalf("third rescue: %v, %v", ids(third), err)
	}
	if rows := e.claim("B", t1, 10); len(rows) != 3 {
		t.Fatalf("claimed %d rescued tasks, want 3", len(rows))
	}
}

func testHeartbeat(t *testing.T, e *env) {
	a, b, c := e.insert(), e.insert(), e.insert()
	t0 := e.clock.Now()
	e.claim("A", t0, 2) // a and b
	until := t0.Add(time.Hour)
	held, err := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "A", IDs: []int64{a.ID, b.ID, c.ID, c.ID + 99}, Now: t0, LeaseExpiresAt: until})
	if err != nil || !sameIDs(held, []int64{a.ID, b.ID}) {
		t.Fatalf("heartbeat held %v (%v), want [%d %d]", held, err, a.ID, b.ID)
	}
	if got := e.get(a.ID); !got.LeaseExpiresAt.Equal(until) {
		t.Fatalf("lease not extended: %v", got.LeaseExpiresAt)
	}
	if held, _ := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "B", IDs: []int64{a.ID}, Now: t0, LeaseExpiresAt: until.Add(time.Hour)}); len(held) != 0 {
		t.Fatalf("another owner extended A's lease: %v", held)
	}
	if got := e.get(a.ID); !got.LeaseExpiresAt.Equal(until) || got.LeaseOwner != "A" {
		t.Fatalf("lease changed by another owner: %q %v", got.LeaseOwner, got.LeaseExpiresAt)
	}
	// An extended lease is not rescued when the old one would have expired.
	rows, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: t0.Add(leaseTTL + time.Second), Limit: 10, Backoff: func(string, int) time.Duration { return 0 }})
	if err != nil || len(rows) != 0 {
		t.Fatalf("rescued renewed tasks: %v, %v", ids(rows), err)
	}
	e.finish("A", t0, driver.Transition{ID: a.ID, Fence: 1, State: driver.StateSucceeded})
	if held, _ := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "A", IDs: []int64{a.ID, b.ID}, Now: t0, LeaseExpiresAt: until}); !sameIDs(held, []int64{b.ID}) {
		t.Fatalf("heartbeat after a finish held %v, want [%d]", held, b.ID)
	}
}
