package drivertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

func testSucceed(t *testing.T, e *env) {
	row := e.insert()
	r := e.claimOne("w1", e.clock.Now())
	now := e.clock.Advance(2 * time.Second)
	applied := e.finish("w1", now, driver.Transition{ID: r.ID, Fence: 1, State: driver.StateSucceeded, Result: []byte(`{"ok":true}`)})
	if !slices.Equal(applied, []int64{row.ID}) {
		t.Fatalf("finish applied %v, want [%d]", applied, row.ID)
	}
	got := e.get(row.ID)
	switch {
	case got.State != driver.StateSucceeded || got.Attempt != 1:
		t.Fatalf("state %s attempt %d", got.State, got.Attempt)
	case !jsonEqual(got.Result, []byte(`{"ok":true}`)):
		t.Fatalf("result %s", got.Result)
	case !got.FinishedAt.Equal(now) || !got.UpdatedAt.Equal(now):
		t.Fatalf("finished %v updated %v, want %v", got.FinishedAt, got.UpdatedAt, now)
	case got.LeaseOwner != "w1" || !got.LeaseExpiresAt.IsZero() || len(got.Errors) != 0:
		t.Fatalf("want owner w1 kept, no lease, no errors: %+v", got)
	}
	if again := e.finish("w1", now, driver.Transition{ID: r.ID, Fence: 1, State: driver.StateDead}); len(again) != 0 {
		t.Fatalf("a finished task was finished again: %v", again)
	}
	if got := e.get(row.ID); got.State != driver.StateSucceeded {
		t.Fatalf("state changed to %s after a second finish", got.State)
	}
	// Success without a result stores none.
	row2 := e.insert()
	e.claimOne("w1", now)
	e.finish("w1", now, driver.Transition{ID: row2.ID, Fence: 1, State: driver.StateSucceeded})
	if got := e.get(row2.ID); got.State != driver.StateSucceeded || got.Result != nil {
		t.Fatalf("no-result success: state %s result %q", got.State, got.Result)
	}
}

func testRetryAndDead(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.MaxAttempts = 2 })
	t0 := e.clock.Now()
	e.claimOne("w1", t0)
	t1 := e.clock.Advance(time.Second)
	ae := attemptError(1, "w1", t0, t1, "boom 1")
	retryAt := t1.Add(30 * time.Second)
	if applied := e.finish("w1", t1, driver.Transition{ID: row.ID, Fence: 1, State: driver.StatePending, RunAt: retryAt, Error: ae}); len(applied) != 1 {
		t.Fatalf("retry not applied")
	}
	got := e.get(row.ID)
	switch {
	case got.State != driver.StatePending || got.Attempt != 1 || !got.RunAt.Equal(retryAt):
		t.Fatalf("after retry: state %s attempt %d run_at %v (want %v)", got.State, got.Attempt, got.RunAt, retryAt)
	case got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() || !got.FinishedAt.IsZero():
		t.Fatalf("after retry: lease %q/%v finished %v", got.LeaseOwner, got.LeaseExpiresAt, got.FinishedAt)
	case len(got.Errors) != 1:
		t.Fatalf("after retry: %d errors, want 1", len(got.Errors))
	}
	checkAttemptError(t, got.Errors[0], *ae)
	if rows := e.claim("w2", retryAt.Add(-time.Millisecond), 1); len(rows) != 0 {
		t.Fatal("claimed before the retry's run_at")
	}
	t2 := e.clock.Advance(30 * time.Second)
	e.claimOne("w2", t2)
	if r := e.get(row.ID); r.Attempt != 2 || !r.StartedAt.Equal(t0) || !r.AttemptedAt.Equal(t2) {
		t.Fatalf("second claim: attempt %d started %v attempted %v", r.Attempt, r.StartedAt, r.AttemptedAt)
	}
	t3 := e.clock.Advance(time.Second)
	ae2 := attemptError(2, "w2", t2, t3, "boom 2")
	e.finish("w2", t3, driver.Transition{ID: row.ID, Fence: 2, State: driver.StateDead, Error: ae2})
	got = e.get(row.ID)
	if got.State != driver.StateDead || got.Attempt != 2 || !got.FinishedAt.Equal(t3) || len(got.Errors) != 2 {
		t.Fatalf("dead: state %s attempt %d finished %v errors %d", got.State, got.Attempt, got.FinishedAt, len(got.Errors))
	}
	checkAttemptError(t, got.Errors[0], *ae)
	checkAttemptError(t, got.Errors[1], *ae2)
	if rows := e.claim("w1", t3.Add(time.Hour), 10); len(rows) != 0 {
		t.Fatal("a dead task was claimed")
	}
}

func testRefund(t *testing.T, e *env) {
	row := e.insert()
	now := e.clock.Now()
	e.claimOne("w1", now)
	later := now.Add(5 * time.Second)
	e.finish("w1", now, driver.Transition{ID: row.ID, Fence: 1, State: driver.StatePending, RunAt: later, Refund: true})
	got := e.get(row.ID)
	if got.State != driver.StatePending || got.Attempt != 0 || len(got.Errors) != 0 || !got.RunAt.Equal(later) {
		t.Fatalf("refund: state %s attempt %d errors %d run_at %v", got.State, got.Attempt, len(got.Errors), got.RunAt)
	}
	if r := e.claimOne("w1", later); r.Attempt != 1 {
		t.Fatalf("claim after refund: attempt %d, want 1", r.Attempt)
	}
}

func testFinishMixedBatch(t *testing.T, e *env) {
	var rows []*driver.TaskRow
	for range 6 {
		rows = append(rows, e.insert())
	}
	now := e.clock.Now()
	e.claim("w1", now, 4)
	e.claim("w2", now, 1) // rows[4] is w2's; rows[5] stays pending
	ae := attemptError(1, "w1", now, now, "x")
	applied := e.finish("w1", now,
		driver.Transition{ID: rows[0].ID, Fence: 1, State: driver.StateSucceeded, Result: []byte(`1`)},
		driver.Transition{ID: rows[1].ID, Fence: 1, State: driver.StatePending, RunAt: now.Add(time.Minute), Error: ae},
		driver.Transition{ID: rows[2].ID, Fence: 2, State: driver.StateSucceeded}, // wrong attempt
		driver.Transition{ID: rows[3].ID, Fence: 1, State: driver.StateDead, Error: ae},
		driver.Transition{ID: rows[4].ID, Fence: 1, State: driver.StateSucceeded},       // w2's
		driver.Transition{ID: rows[4].ID + 100, Fence: 1, State: driver.StateSucceeded}, // missing
		driver.Transition{ID: rows[5].ID, Fence: 1, State: driver.StateSucceeded},       // not running
	)
	if !sameIDs(applied, []int64{rows[0].ID, rows[1].ID, rows[3].ID}) {
		t.Fatalf("applied %v, want %v", applied, []int64{rows[0].ID, rows[1].ID, rows[3].ID})
	}
	want := []driver.State{driver.StateSucceeded, driver.StatePending, driver.StateRunning, driver.StateDead, driver.StateRunning, driver.StatePending}
	for i, r := range rows {
		if got := e.get(r.ID); got.State != want[i] {
			t.Fatalf("task %d: state %s, want %s", i, got.State, want[i])
		}
	}
	if e.total() != 6 {
		t.Fatalf("finish changed the number of tasks to %d", e.total())
	}
}

func testErrorHistoryKeepsLast20(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.MaxAttempts = 30 })
	now := e.clock.Now()
	for i := 1; i <= 25; i++ {
		r := e.claimOne("w", now)
		if r.Attempt != i {
			t.Fatalf("claim %d: attempt %d", i, r.Attempt)
		}
		e.finish("w", now, driver.Transition{ID: row.ID, Fence: int64(i), State: driver.StatePending, RunAt: now,
			Error: attemptError(i, "w", now, now, fmt.Sprintf("failure %d", i))})
		if got := e.get(row.ID); len(got.Errors) != min(i, driver.MaxErrorHistory) {
			t.Fatalf("after %d failures: %d errors kept", i, len(got.Errors))
		}
	}
	got := e.get(row.ID)
	for j, ae := range got.Errors {
		want := 25 - driver.MaxErrorHistory + 1 + j // attempts 6..25
		if ae.Attempt != want || ae.Error != fmt.Sprintf("failure %d", want) {
			t.Fatalf("error %d: attempt %d %q, want attempt %d", j, ae.Attempt, ae.Error, want)
		}
	}
}

func testFinishTx(t *testing.T, e *env) {
	db := e.db()
	row := e.insert()
	now := e.clock.Now()
	e.claimOne("A", now)
	succeed := driver.Transition{ID: row.ID, Fence: 1, State: driver.StateSucceeded, Result: []byte(`{"r":1}`)}
	finishTx := func(owner string, commit bool) bool {
		t.Helper()
		tx, err := db.BeginTx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := e.drv.FinishTx(e.ctx, tx, owner, now, succeed)
		if err != nil {
			tx.Rollback() //nolint:errcheck
			t.Fatalf("finish tx: %v", err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !finishTx("A", false) {
		t.Fatal("FinishTx by the owner did not apply")
	}
	if got := e.get(row.ID); got.State != driver.StateRunning || got.Result != nil {
		t.Fatalf("rolled-back FinishTx left state %s result %s", got.State, got.Result)
	}
	if finishTx("B", true) {
		t.Fatal("FinishTx by another owner applied")
	}
	if !finishTx("A", true) {
		t.Fatal("FinishTx by the owner did not apply")
	}
	if got := e.get(row.ID); got.State != driver.StateSucceeded || !jsonEqual(got.Result, []byte(`{"r":1}`)) || !got.FinishedAt.Equal(now) {
		t.Fatalf("committed FinishTx: state %s result %s finished %v", got.State, got.Result, got.FinishedAt)
	}
	if finishTx("A", true) {
		t.Fatal("FinishTx applied twice")
	}
}

// testFinishAgain: a finish retried after a commit whose outcome was
// unknown (the connection broke at or after COMMIT) finds the task in the
// state it wrote, and reports it applied, not as a lost lease; it writes
// nothing more. A task rescued or claimed by another worker in the
// meantime is still rejected.
func testFinishAgain(t *testing.T, e *env) {
	t0 := e.clock.Now()
	kinds := []string{"success", "success with result", "retry", "release", "dead"}
	rows := map[string]*driver.TaskRow{}
	for _, k := range kinds {
		rows[k] = e.insert()
	}
	e.claim("w1", t0, len(kinds))
	t1 := e.clock.Advance(time.Second)
	var ts []driver.Transition
	for _, k := range kinds {
		tr := everyTransition(rows[k].ID, 1, t1)[k]
		if tr.Error != nil {
			tr.Error.Node, tr.Error.Start = "w1", t0
		}
		ts = append(ts, tr)
	}
	first := e.finish("w1", t1, ts...)
	if len(first) != len(kinds) {
		t.Fatalf("first finish applied %v, want all %d", first, len(kinds))
	}
	before := map[int64]*driver.TaskRow{}
	for _, r := range rows {
		before[r.ID] = e.get(r.ID)
	}
	t2 := e.clock.Advance(time.Second)
	again := e.finish("w1", t2, ts...)
	slices.Sort(first)
	slices.Sort(again)
	if !slices.Equal(again, first) {
		t.Fatalf("the same finish again applied %v, want %v: a write of its own was taken for a lost lease", again, first)
	}
	for id, b := range before {
		if got := e.get(id); got.State != b.State || !got.UpdatedAt.Equal(b.UpdatedAt) || len(got.Errors) != len(b.Errors) || got.Attempt != b.Attempt {
			t.Fatalf("task %d written again: %+v, was %+v", id, got, b)
		}
	}
	// Another owner's finish, or one of another fence, is no retry. (A
	// release records no owner: its fence alone names the claim, which
	// was w1's.)
	for _, k := range kinds {
		tr := everyTransition(rows[k].ID, 1, t1)[k]
		if got := e.finish("w2", t2, tr); len(got) != 0 && k != "release" {
			t.Fatalf("%s by w2 reported applied for w1's write", k)
		}
		tr.Fence = 2
		if got := e.finish("w1", t2, tr); len(got) != 0 {
			t.Fatalf("%s at fence 2 reported applied", k)
		}
	}

	// Rescued: w1's lease expired, the rescuer retried the task. w1's late
	// finish is rejected, whichever it is.
	row := e.insert()
	t3 := e.clock.Now()
	e.claimOne("w1", t3)
	t4 := e.clock.Advance(leaseTTL + time.Second)
	if rescued, err := e.rescue(t4, 10, time.Hour); err != nil || len(rescued) != 1 {
		t.Fatalf("rescue: %v, %v", ids(rescued), err)
	}
	for kind, tr := range everyTransition(row.ID, 1, t4) {
		if tr.Error != nil {
			tr.Error.Node, tr.Error.Start = "w1", t3
		}
		if got := e.finish("w1", t4, tr); len(got) != 0 {
			t.Fatalf("%s after the rescue reported applied: the rescuer's write was taken for w1's", kind)
		}
	}
	// Claimed again by w2 and retried by it: w1's finish is rejected.
	t5 := e.clock.Advance(2 * time.Hour)
	e.claimOne("w2", t5)
	if got := e.finish("w1", t5, driver.Transition{ID: row.ID, Fence: 2, State: driver.StateSucceeded}); len(got) != 0 {
		t.Fatal("w1's success applied to w2's attempt")
	}
}
