package drivertest

import (
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
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
	const backoff = 10 * time.Second
	for _, at := range []time.Time{t0.Add(leaseTTL - time.Second), t0.Add(leaseTTL)} {
		rows, err := e.rescue(at, 100, backoff)
		if err != nil || len(rows) != 0 {
			t.Fatalf("rescue at %v before expiry: %v, %v", at.Sub(t0), ids(rows), err)
		}
	}

	// A vanished: its lease expires and the rescuer takes the task back.
	t1 := e.clock.Advance(leaseTTL + time.Second)
	rows, err := e.rescue(t1, 100, backoff)
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
	rows, err := e.rescue(t1, 10, time.Second)
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

// A lease renewed between the rescuer's listing and its write is not
// lost: the write applies only while the lease is still expired.
func testRescueSkipsRenewedLease(t *testing.T, e *env) {
	row := e.insert()
	t0 := e.clock.Now()
	e.claimOne("A", t0)
	t1 := e.clock.Advance(leaseTTL + time.Second)
	expired, at, err := e.drv.ListExpired(e.ctx, driver.ExpiredParams{Now: t1, Limit: 10})
	if err != nil || len(expired) != 1 || expired[0].ID != row.ID || expired[0].LeaseOwner != "A" || expired[0].Fence != 1 {
		t.Fatalf("list expired: %+v, %v", expired, err)
	}
	if r := expired[0]; r.Type != row.Type || r.Queue != row.Queue || r.Attempt != 1 || r.State != driver.StateRunning ||
		!r.RunAt.Equal(row.RunAt) || !r.AttemptedAt.Equal(t0) || !r.LeaseExpiresAt.Equal(t0.Add(leaseTTL)) {
		t.Fatalf("listed row %+v", r)
	}
	if got := e.get(row.ID); got.State != driver.StateRunning {
		t.Fatalf("listing changed the task: %s", got.State)
	}
	// A's heartbeat gets in first.
	if held, err := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "A", IDs: []int64{row.ID}, Now: t1, LeaseExpiresAt: t1.Add(leaseTTL)}); err != nil || len(held) != 1 {
		t.Fatalf("heartbeat: %v, %v", held, err)
	}
	tr := engine.ExpiredTransition(&expired[0], at, 0)
	rows, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: at, Tasks: []driver.RescueTask{{Owner: "A", Transition: tr}}})
	if err != nil || len(rows) != 0 {
		t.Fatalf("rescued a renewed lease: %v, %v", ids(rows), err)
	}
	if got := e.get(row.ID); got.State != driver.StateRunning || got.LeaseOwner != "A" || len(got.Errors) != 0 {
		t.Fatalf("renewed task changed: %s owner %q errors %d", got.State, got.LeaseOwner, len(got.Errors))
	}
	// A wrong owner or fence does not apply either, even once expired.
	t2 := e.clock.Advance(2 * leaseTTL)
	expired, at, err = e.drv.ListExpired(e.ctx, driver.ExpiredParams{Now: t2, Limit: 10})
	if err != nil || len(expired) != 1 {
		t.Fatalf("list expired: %v, %v", ids(expired), err)
	}
	tr = engine.ExpiredTransition(&expired[0], at, 0)
	stale := tr
	stale.Fence++
	for _, rt := range []driver.RescueTask{{Owner: "B", Transition: tr}, {Owner: "A", Transition: stale}} {
		if rows, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: at, Tasks: []driver.RescueTask{rt}}); err != nil || len(rows) != 0 {
			t.Fatalf("unfenced rescue applied: %v, %v", ids(rows), err)
		}
	}
	rows, err = e.drv.Rescue(e.ctx, driver.RescueParams{Now: at, Tasks: []driver.RescueTask{{Owner: "A", Transition: tr}}})
	if err != nil || len(rows) != 1 || rows[0].State != driver.StatePending {
		t.Fatalf("rescue: %v, %v", ids(rows), err)
	}
}

func testRescueLimit(t *testing.T, e *env) {
	for range 3 {
		e.insert()
	}
	t0 := e.clock.Now()
	e.claim("A", t0, 3)
	t1 := e.clock.Advance(leaseTTL + time.Second)
	first, err := e.rescue(t1, 2, 0)
	if err != nil || len(first) != 2 {
		t.Fatalf("first rescue: %v, %v", ids(first), err)
	}
	second, err := e.rescue(t1, 2, 0)
	if err != nil || len(second) != 1 {
		t.Fatalf("second rescue: %v, %v", ids(second), err)
	}
	if third, err := e.rescue(t1, 2, 0); err != nil || len(third) != 0 {
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
	rows, err := e.rescue(t0.Add(leaseTTL+time.Second), 10, 0)
	if err != nil || len(rows) != 0 {
		t.Fatalf("rescued renewed tasks: %v, %v", ids(rows), err)
	}
	e.finish("A", t0, driver.Transition{ID: a.ID, Fence: 1, State: driver.StateSucceeded})
	if held, _ := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "A", IDs: []int64{a.ID, b.ID}, Now: t0, LeaseExpiresAt: until}); !sameIDs(held, []int64{b.ID}) {
		t.Fatalf("heartbeat after a finish held %v, want [%d]", held, b.ID)
	}
}
