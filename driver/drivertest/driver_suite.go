package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// driverTests call the driver directly, with explicit owners and times.
var driverTests = []test{
	{"InsertAndGet", testInsertAndGet},
	{"ClaimOrder", testClaimOrder},
	{"ClaimBatchOrder", testClaimBatchOrder},
	{"ClaimNotBeforeRunAt", testClaimNotBeforeRunAt},
	{"ClaimMarksRunning", testClaimMarksRunning},
	{"Succeed", testSucceed},
	{"RetryAndDead", testRetryAndDead},
	{"Refund", testRefund},
	{"FinishMixedBatch", testFinishMixedBatch},
	{"FencingAfterRescue", testFencingAfterRescue},
	{"RescueLastAttemptDead", testRescueLastAttemptDead},
	{"RescueLimit", testRescueLimit},
	{"Heartbeat", testHeartbeat},
	{"CancelAndRetry", testCancelAndRetry},
	{"CancelRunningRejectsFinish", testCancelRunningRejectsFinish},
	{"WrongStateAndNotFound", testWrongStateAndNotFound},
	{"RetryKeyHeldByNewerTask", testRetryKeyHeldByNewerTask},
	{"ErrorHistoryKeepsLast20", testErrorHistoryKeepsLast20},
	{"Idempotency", testDriverIdempotency},
	{"IdempotencyConflictWritesNothing", testIdempotencyConflictWritesNothing},
	{"KeyReleasedByDeadAndCancelled", testKeyReleased},
	{"ListAndCounts", testListAndCounts},
	{"Leadership", testLeadership},
	{"InsertTx", testInsertTx},
	{"FinishTx", testFinishTx},
	{"InsertTxConflictWritesNothing", testInsertTxConflict},
}

func testInsertAndGet(t *testing.T, e *env) {
	now := e.clock.Now()
	row := e.insert(func(p *driver.InsertParams) {
		p.Queue, p.Type, p.Priority = "mail", "dt.email", 7
		p.Payload = []byte(`{"to":"a@example.com","n":[1,2]}`)
		p.MaxAttempts, p.RunAt, p.Timeout = 5, now.Add(time.Minute), 90*time.Second
		p.IdemKey, p.PayloadDigest, p.Meta = "k:one", "d1", []byte(`{"tenant":"x"}`)
	})
	got := e.get(row.ID)
	for _, r := range []*driver.TaskRow{row, got} {
		switch {
		case r.ID != row.ID || r.Queue != "mail" || r.Type != "dt.email" || r.Priority != 7:
			t.Fatalf("identity: %+v", r)
		case !jsonEqual(r.Payload, []byte(`{"n":[1,2],"to":"a@example.com"}`)):
			t.Fatalf("payload %s", r.Payload)
		case r.State != driver.StatePending || r.Attempt != 0 || r.MaxAttempts != 5:
			t.Fatalf("state %s attempt %d/%d", r.State, r.Attempt, r.MaxAttempts)
		case !r.RunAt.Equal(now.Add(time.Minute)) || r.Timeout != 90*time.Second:
			t.Fatalf("run_at %v timeout %v", r.RunAt, r.Timeout)
		case r.IdemKey != "k:one" || r.PayloadDigest != "d1" || !jsonEqual(r.Meta, []byte(`{"tenant":"x"}`)):
			t.Fatalf("key %q digest %q meta %s", r.IdemKey, r.PayloadDigest, r.Meta)
		case !r.CreatedAt.Equal(now) || !r.UpdatedAt.Equal(now):
			t.Fatalf("created %v updated %v, want %v", r.CreatedAt, r.UpdatedAt, now)
		case !r.StartedAt.IsZero() || !r.AttemptedAt.IsZero() || !r.FinishedAt.IsZero():
			t.Fatalf("times set before any run: %+v", r)
		case r.LeaseOwner != "" || !r.LeaseExpiresAt.IsZero() || len(r.Errors) != 0 || r.Result != nil:
			t.Fatalf("lease, errors or result set on a new task: %+v", r)
		}
	}
	second := e.insert()
	if second.ID <= row.ID {
		t.Fatalf("ids not increasing: %d then %d", row.ID, second.ID)
	}
	if second.IdemKey != "" || second.Meta != nil {
		t.Fatalf("empty key and meta stored as %q, %s", second.IdemKey, second.Meta)
	}
	if _, err := e.drv.Get(e.ctx, second.ID+1000); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get missing: %v, want ErrNotFound", err)
	}
}

// orderFixture inserts tasks into queue whose claim order is known and
// returns them in that order, with one future task and one of another queue.
func orderFixture(e *env, queue string) (want []int64, future, other int64) {
	now := e.clock.Now()
	at := func(prio int, runAt time.Duration) func(*driver.InsertParams) {
		return func(p *driver.InsertParams) { p.Queue, p.Priority, p.RunAt = queue, prio, now.Add(runAt) }
	}
	a := e.insert(at(0, -3*time.Second))
	b := e.insert(at(5, -1*time.Second))
	c := e.insert(at(5, -2*time.Second))
	d := e.insert(at(5, -2*time.Second))
	x := e.insert(at(-1, -10*time.Second))
	f := e.insert(at(10, time.Second))
	g := e.insert(at(100, -time.Hour), func(p *driver.InsertParams) { p.Queue = queue + "-other" })
	return []int64{c.ID, d.ID, b.ID, a.ID, x.ID}, f.ID, g.ID
}

func testClaimOrder(t *testing.T, e *env) {
	want, future, other := orderFixture(e, "default")
	now := e.clock.Now()
	var got []int64
	for range want {
		got = append(got, e.claimOne("w1", now).ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("claim order %v, want %v (priority DESC, run_at ASC, id ASC)", got, want)
	}
	if rows := e.claim("w1", now, 10); len(rows) != 0 {
		t.Fatalf("claimed %v: future and other-queue tasks must wait", ids(rows))
	}
	if r := e.claimOne("w1", now.Add(time.Second)); r.ID != future {
		t.Fatalf("claimed %d at its run_at, want %d", r.ID, future)
	}
	if rows := e.claimQueue("default-other", "w1", now, 10); len(rows) != 1 || rows[0].ID != other {
		t.Fatalf("claim other queue: %v, want [%d]", ids(rows), other)
	}
}

func testClaimBatchOrder(t *testing.T, e *env) {
	want, _, _ := orderFixture(e, "default")
	if got := ids(e.claim("w1", e.clock.Now(), 100)); !slices.Equal(got, want) {
		t.Fatalf("batch claim %v, want %v", got, want)
	}
	// A limit takes the best tasks, not any tasks.
	want, _, _ = orderFixture(e, "limited")
	if got := ids(e.claimQueue("limited", "w1", e.clock.Now(), 3)); !slices.Equal(got, want[:3]) {
		t.Fatalf("claim limit 3: %v, want %v", got, want[:3])
	}
}

func testClaimNotBeforeRunAt(t *testing.T, e *env) {
	now := e.clock.Now()
	runAt := now.Add(10 * time.Second)
	row := e.insert(func(p *driver.InsertParams) { p.RunAt = runAt })
	if rows := e.claim("w1", runAt.Add(-time.Microsecond), 10); len(rows) != 0 {
		t.Fatalf("claimed a task 1µs before its run_at")
	}
	if got := e.claimOne("w1", runAt); got.ID != row.ID {
		t.Fatalf("claimed %d at run_at, want %d", got.ID, row.ID)
	}
}

// testClaimMarksRunning checks the stored row after a claim in full, and
// in the returned row the fields the engine runs a task from: a driver may
// return a narrow row (StartedAt, UpdatedAt, IdemKey, Errors, Meta may be
// left zero), but never a wrong one.
func testClaimMarksRunning(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.Queue, p.Priority, p.Timeout = "default", 3, 42*time.Second })
	now := e.clock.Advance(time.Second)
	got := e.claimOne("w1", now)
	switch r := got; {
	case r.ID != row.ID || r.State != driver.StateRunning || r.Attempt != 1 || r.Queue != "default":
		t.Fatalf("claimed %d queue %q state %s attempt %d", r.ID, r.Queue, r.State, r.Attempt)
	case r.LeaseOwner != "w1" || !r.LeaseExpiresAt.Equal(now.Add(leaseTTL)) || !r.AttemptedAt.Equal(now):
		t.Fatalf("claimed row: lease %q until %v attempted %v", r.LeaseOwner, r.LeaseExpiresAt, r.AttemptedAt)
	case !jsonEqual(r.Payload, row.Payload) || r.Type != row.Type || r.MaxAttempts != row.MaxAttempts ||
		r.Priority != 3 || r.Timeout != 42*time.Second || !r.RunAt.Equal(row.RunAt) || !r.CreatedAt.Equal(row.CreatedAt):
		t.Fatalf("claimed row lost fields: %+v", r)
	}
	switch r := e.get(row.ID); {
	case r.State != driver.StateRunning || r.Attempt != 1:
		t.Fatalf("stored: state %s attempt %d", r.State, r.Attempt)
	case r.LeaseOwner != "w1" || !r.LeaseExpiresAt.Equal(now.Add(leaseTTL)):
		t.Fatalf("stored lease %q until %v", r.LeaseOwner, r.LeaseExpiresAt)
	case !r.StartedAt.Equal(now) || !r.AttemptedAt.Equal(now) || !r.UpdatedAt.Equal(now):
		t.Fatalf("stored: started %v attempted %v updated %v, want %v", r.StartedAt, r.AttemptedAt, r.UpdatedAt, now)
	}
	if rows := e.claim("w2", now, 10); len(rows) != 0 {
		t.Fatalf("a running task was claimed again: %v", ids(rows))
	}
}

func testSucceed(t *testing.T, e *env) {
	row := e.insert()
	r := e.claimOne("w1", e.clock.Now())
	now := e.clock.Advance(2 * time.Second)
	applied := e.finish("w1", now, driver.Transition{ID: r.ID, Attempt: 1, State: driver.StateSucceeded, Result: []byte(`{"ok":true}`)})
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
	case got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() || len(got.Errors) != 0:
		t.Fatalf("lease or errors left: %+v", got)
	}
	if again := e.finish("w1", now, driver.Transition{ID: r.ID, Attempt: 1, State: driver.StateDead}); len(again) != 0 {
		t.Fatalf("a finished task was finished again: %v", again)
	}
	if got := e.get(row.ID); got.State != driver.StateSucceeded {
		t.Fatalf("state changed to %s after a second finish", got.State)
	}
	// Success without a result stores none.
	row2 := e.insert()
	e.claimOne("w1", now)
	e.finish("w1", now, driver.Transition{ID: row2.ID, Attempt: 1, State: driver.StateSucceeded})
	if got := e.get(row2.ID); got.State != driver.StateSucceeded || got.Result != nil {
		t.Fatalf("no-result success: state %s result %q", got.State, got.Result)
	}
}

func attemptError(attempt int, node string, start, end time.Time, msg string) *driver.AttemptError {
	return &driver.AttemptError{Attempt: attempt, Node: node, Start: start, End: end, Outcome: driver.OutcomeError, Error: msg}
}

func testRetryAndDead(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.MaxAttempts = 2 })
	t0 := e.clock.Now()
	e.claimOne("w1", t0)
	t1 := e.clock.Advance(time.Second)
	ae := attemptError(1, "w1", t0, t1, "boom 1")
	retryAt := t1.Add(30 * time.Second)
	if applied := e.finish("w1", t1, driver.Transition{ID: row.ID, Attempt: 1, State: driver.StatePending, RunAt: retryAt, Error: ae}); len(applied) != 1 {
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
	e.finish("w2", t3, driver.Transition{ID: row.ID, Attempt: 2, State: driver.StateDead, Error: ae2})
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

func checkAttemptError(t *testing.T, got, want driver.AttemptError) {
	t.Helper()
	if got.Attempt != want.Attempt || got.Node != want.Node || got.Outcome != want.Outcome ||
		got.Error != want.Error || got.Stack != want.Stack || !got.Start.Equal(want.Start) || !got.End.Equal(want.End) {
		t.Fatalf("attempt error\n got %+v\nwant %+v", got, want)
	}
}

func testRefund(t *testing.T, e *env) {
	row := e.insert()
	now := e.clock.Now()
	e.claimOne("w1", now)
	later := now.Add(5 * time.Second)
	e.finish("w1", now, driver.Transition{ID: row.ID, Attempt: 1, State: driver.StatePending, RunAt: later, Refund: true})
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
		driver.Transition{ID: rows[0].ID, Attempt: 1, State: driver.StateSucceeded, Result: []byte(`1`)},
		driver.Transition{ID: rows[1].ID, Attempt: 1, State: driver.StatePending, RunAt: now.Add(time.Minute), Error: ae},
		driver.Transition{ID: rows[2].ID, Attempt: 2, State: driver.StateSucceeded}, // wrong attempt
		driver.Transition{ID: rows[3].ID, Attempt: 1, State: driver.StateDead, Error: ae},
		driver.Transition{ID: rows[4].ID, Attempt: 1, State: driver.StateSucceeded},       // w2's
		driver.Transition{ID: rows[4].ID + 100, Attempt: 1, State: driver.StateSucceeded}, // missing
		driver.Transition{ID: rows[5].ID, Attempt: 1, State: driver.StateSucceeded},       // not running
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

// everyTransition is one transition of each kind a worker sends for task
// id's attempt: drivers may write them by different statements (a batched
// success without result, say), and fencing must hold for each.
func everyTransition(id int64, attempt int, now time.Time) map[string]driver.Transition {
	ae := attemptError(attempt, "stale", now, now, "stale")
	return map[string]driver.Transition{
		"success":             {ID: id, Attempt: attempt, State: driver.StateSucceeded},
		"success with result": {ID: id, Attempt: attempt, State: driver.StateSucceeded, Result: []byte(`"stale"`)},
		"retry":               {ID: id, Attempt: attempt, State: driver.StatePending, RunAt: now, Error: ae},
		"release":             {ID: id, Attempt: attempt, State: driver.StatePending, RunAt: now, Refund: true},
		"dead":                {ID: id, Attempt: attempt, State: driver.StateDead, Error: ae},
	}
}

// requireRejected finishes each kind of transition as owner and fails the
// test if any applied.
func (e *env) requireRejected(owner string, now time.Time, ts map[string]driver.Transition) {
	e.t.Helper()
	for kind, tr := range ts {
		if got := e.finish(owner, now, tr); len(got) != 0 {
			e.t.Fatalf("%s by %s (attempt %d) applied: fencing failed", kind, owner, tr.Attempt)
		}
		if dber, ok := e.drv.(driver.DBer); ok && tr.Error == nil && !tr.Refund && tr.State == driver.StateSucceeded {
			tx, err := dber.DB().BeginTx(e.ctx, nil)
			if err != nil {
				e.t.Fatal(err)
			}
			ok, err := e.drv.FinishTx(e.ctx, tx, owner, now, tr)
			if cerr := tx.Commit(); err == nil {
				err = cerr
			}
			if err != nil || ok {
				e.t.Fatalf("%s by %s in FinishTx: applied %v, %v", kind, owner, ok, err)
			}
		}
	}
}

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
		if r.State != driver.StatePending || r.Attempt != 1 || !r.RunAt.Equal(t1.Add(10*time.Second)) || r.LeaseOwner != "" {
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
	if applied := e.finish("B", t2, driver.Transition{ID: row.ID, Attempt: 2, State: driver.StateSucceeded, Result: []byte(`"B"`)}); len(applied) != 1 {
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
	e.finish("A", t0, driver.Transition{ID: a.ID, Attempt: 1, State: driver.StateSucceeded})
	if held, _ := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "A", IDs: []int64{a.ID, b.ID}, Now: t0, LeaseExpiresAt: until}); !sameIDs(held, []int64{b.ID}) {
		t.Fatalf("heartbeat after a finish held %v, want [%d]", held, b.ID)
	}
}

func testCancelAndRetry(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.RunAt = p.Now.Add(time.Hour) })
	t1 := e.clock.Advance(time.Second)
	c, err := e.drv.Cancel(e.ctx, row.ID, t1)
	if err != nil {
		t.Fatalf("cancel pending: %v", err)
	}
	for _, r := range []*driver.TaskRow{c, e.get(row.ID)} {
		if r.State != driver.StateCancelled || !r.FinishedAt.Equal(t1) {
			t.Fatalf("cancelled: state %s finished %v", r.State, r.FinishedAt)
		}
	}
	if rows := e.claim("w", t1.Add(2*time.Hour), 10); len(rows) != 0 {
		t.Fatal("a cancelled task was claimed")
	}
	t2 := e.clock.Advance(time.Second)
	r, err := e.drv.Retry(e.ctx, row.ID, t2)
	if err != nil {
		t.Fatalf("retry cancelled: %v", err)
	}
	for _, r := range []*driver.TaskRow{r, e.get(row.ID)} {
		if r.State != driver.StatePending || r.Attempt != 0 || !r.RunAt.Equal(t2) || !r.FinishedAt.IsZero() {
			t.Fatalf("retried: state %s attempt %d run_at %v finished %v", r.State, r.Attempt, r.RunAt, r.FinishedAt)
		}
	}

	// Dead → pending, history kept, attempts reset, runnable now.
	e.claimOne("w", t2)
	ae := attemptError(1, "w", t2, t2, "bad")
	e.finish("w", t2, driver.Transition{ID: row.ID, Attempt: 1, State: driver.StateDead, Error: ae})
	t3 := e.clock.Advance(time.Second)
	r, err = e.drv.Retry(e.ctx, row.ID, t3)
	if err != nil {
		t.Fatalf("retry dead: %v", err)
	}
	if r.State != driver.StatePending || r.Attempt != 0 || !r.RunAt.Equal(t3) || len(r.Errors) != 1 || !r.FinishedAt.IsZero() {
		t.Fatalf("retried dead: state %s attempt %d run_at %v errors %d finished %v", r.State, r.Attempt, r.RunAt, len(r.Errors), r.FinishedAt)
	}
	if got := e.claimOne("w", t3); got.ID != row.ID || got.Attempt != 1 {
		t.Fatalf("claim after retry: %d attempt %d", got.ID, got.Attempt)
	}
}

func testCancelRunningRejectsFinish(t *testing.T, e *env) {
	row := e.insert()
	t0 := e.clock.Now()
	e.claimOne("A", t0)
	c, err := e.drv.Cancel(e.ctx, row.ID, t0)
	if err != nil {
		t.Fatalf("cancel running: %v", err)
	}
	if c.State != driver.StateCancelled || c.LeaseOwner != "" || !c.LeaseExpiresAt.IsZero() {
		t.Fatalf("cancelled running: state %s lease %q %v", c.State, c.LeaseOwner, c.LeaseExpiresAt)
	}
	e.requireRejected("A", t0, everyTransition(row.ID, 1, t0))
	if held, _ := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "A", IDs: []int64{row.ID}, Now: t0, LeaseExpiresAt: t0.Add(time.Hour)}); len(held) != 0 {
		t.Fatal("heartbeat kept a cancelled task")
	}
	got := e.get(row.ID)
	if got.State != driver.StateCancelled || got.Result != nil || len(got.Errors) != 0 {
		t.Fatalf("after rejected finishes: state %s result %s errors %d", got.State, got.Result, len(got.Errors))
	}
	rows, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: t0.Add(time.Hour), Limit: 10, Backoff: func(string, int) time.Duration { return 0 }})
	if err != nil || len(rows) != 0 {
		t.Fatalf("rescue touched a cancelled task: %v %v", ids(rows), err)
	}
}

func testWrongStateAndNotFound(t *testing.T, e *env) {
	now := e.clock.Now()
	pending := e.insert(func(p *driver.InsertParams) { p.RunAt = now.Add(time.Hour) })
	running := e.insert()
	succeeded := e.insert()
	dead := e.insert()
	claimed := e.claim("w", now, 3)
	if len(claimed) != 3 {
		t.Fatalf("claimed %d", len(claimed))
	}
	e.finish("w", now,
		driver.Transition{ID: succeeded.ID, Attempt: 1, State: driver.StateSucceeded},
		driver.Transition{ID: dead.ID, Attempt: 1, State: driver.StateDead, Error: attemptError(1, "w", now, now, "x")})
	for _, id := range []int64{pending.ID, running.ID, succeeded.ID} {
		before := e.get(id)
		if _, err := e.drv.Retry(e.ctx, id, now); !errors.Is(err, driver.ErrWrongState) {
			t.Fatalf("retry %s task: %v, want ErrWrongState", before.State, err)
		}
		if after := e.get(id); after.State != before.State || after.Attempt != before.Attempt {
			t.Fatalf("failed retry changed the task: %s → %s", before.State, after.State)
		}
	}
	for _, id := range []int64{succeeded.ID, dead.ID} {
		before := e.get(id)
		if _, err := e.drv.Cancel(e.ctx, id, now); !errors.Is(err, driver.ErrWrongState) {
			t.Fatalf("cancel %s task: %v, want ErrWrongState", before.State, err)
		}
		if after := e.get(id); after.State != before.State {
			t.Fatalf("failed cancel changed the task: %s → %s", before.State, after.State)
		}
	}
	e.drv.Cancel(e.ctx, pending.ID, now) //nolint:errcheck // checked by state below
	if _, err := e.drv.Cancel(e.ctx, pending.ID, now); !errors.Is(err, driver.ErrWrongState) {
		t.Fatalf("cancel a cancelled task: %v, want ErrWrongState", err)
	}
	missing := dead.ID + 1000
	if _, err := e.drv.Cancel(e.ctx, missing, now); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("cancel missing: %v, want ErrNotFound", err)
	}
	if _, err := e.drv.Retry(e.ctx, missing, now); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("retry missing: %v, want ErrNotFound", err)
	}
	if _, err := e.drv.Get(e.ctx, missing); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get missing: %v, want ErrNotFound", err)
	}
	if e.total() != 4 {
		t.Fatalf("%d tasks, want 4", e.total())
	}
}

func testRetryKeyHeldByNewerTask(t *testing.T, e *env) {
	key := func(p *driver.InsertParams) { p.IdemKey = "k:order-9" }
	old := e.insert(key)
	now := e.clock.Now()
	if _, err := e.drv.Cancel(e.ctx, old.ID, now); err != nil {
		t.Fatal(err)
	}
	newer := e.insert(key) // the cancelled task released the key
	if newer.ID == old.ID {
		t.Fatal("resubmission returned the cancelled task")
	}
	if _, err := e.drv.Retry(e.ctx, old.ID, now); !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Fatalf("retry while a newer task holds the key: %v, want ErrIdempotencyConflict", err)
	}
	if got := e.get(old.ID); got.State != driver.StateCancelled {
		t.Fatalf("failed retry changed the task to %s", got.State)
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
		e.finish("w", now, driver.Transition{ID: row.ID, Attempt: i, State: driver.StatePending, RunAt: now,
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

func testDriverIdempotency(t *testing.T, e *env) {
	key := func(k, digest string) func(*driver.InsertParams) {
		return func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = k, digest }
	}
	first := e.insert(key("k:a", "d1"))
	res, err := e.drv.Insert(e.ctx, []driver.InsertParams{e.params(key("k:a", "d1"))})
	if err != nil || len(res) != 1 || !res[0].Duplicate || res[0].Task.ID != first.ID {
		t.Fatalf("same key and digest: %+v, %v; want duplicate of %d", res, err, first.ID)
	}
	// Within one insert, the second of two equal keys is a duplicate of the first.
	res, err = e.drv.Insert(e.ctx, []driver.InsertParams{e.params(key("k:b", "d1")), e.params(key("k:b", "d1")), e.params()})
	if err != nil || len(res) != 3 {
		t.Fatalf("batch insert: %v", err)
	}
	if res[0].Duplicate || !res[1].Duplicate || res[1].Task.ID != res[0].Task.ID || res[2].Duplicate {
		t.Fatalf("batch with a repeated key: dup %v %v %v ids %d %d", res[0].Duplicate, res[1].Duplicate, res[2].Duplicate, res[0].Task.ID, res[1].Task.ID)
	}
	// The key is held while running and after success.
	now := e.clock.Now()
	r := e.claimOne("w", now)
	if r.ID != first.ID {
		t.Fatalf("claimed %d, want %d", r.ID, first.ID)
	}
	for _, state := range []string{"running", "succeeded"} {
		res, err = e.drv.Insert(e.ctx, []driver.InsertParams{e.params(key("k:a", "d1"))})
		if err != nil || !res[0].Duplicate || res[0].Task.ID != first.ID || string(res[0].Task.State) != state {
			t.Fatalf("resubmit while %s: %+v, %v", state, res, err)
		}
		e.finish("w", now, driver.Transition{ID: first.ID, Attempt: 1, State: driver.StateSucceeded})
	}
	if e.total() != 3 {
		t.Fatalf("%d tasks, want 3", e.total())
	}
}

func testIdempotencyConflictWritesNothing(t *testing.T, e *env) {
	held := e.insert(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:x", "d1" })
	conflict := e.params(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:x", "d2" })
	if _, err := e.drv.Insert(e.ctx, []driver.InsertParams{conflict}); !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Fatalf("same key, other digest: %v, want ErrIdempotencyConflict", err)
	}
	// A batch with one conflict writes none of its tasks, before or after it.
	batch := []driver.InsertParams{
		e.params(func(p *driver.InsertParams) { p.Payload = []byte(`{"n":2}`) }),
		conflict,
		e.params(func(p *driver.InsertParams) { p.IdemKey = "k:y" }),
	}
	if _, err := e.drv.Insert(e.ctx, batch); !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Fatalf("batch with a conflict: %v, want ErrIdempotencyConflict", err)
	}
	rows := e.all()
	if len(rows) != 1 || rows[0].ID != held.ID || e.total() != 1 {
		t.Fatalf("a failed insert wrote tasks: %v", ids(rows))
	}
	// The key k:y was not taken by the failed batch.
	if r := e.insert(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:y", "other" }); r == nil {
		t.Fatal("k:y unusable")
	}
}

func testKeyReleased(t *testing.T, e *env) {
	key := func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:r", "d1" }
	now := e.clock.Now()
	dead := e.insert(key)
	e.claimOne("w", now)
	e.finish("w", now, driver.Transition{ID: dead.ID, Attempt: 1, State: driver.StateDead, Error: attemptError(1, "w", now, now, "x")})
	// After dead, even other content may use the key: it is new work.
	second := e.insert(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:r", "d2" })
	if second.ID == dead.ID || second.State != driver.StatePending {
		t.Fatalf("resubmission after dead: %+v", second)
	}
	if _, err := e.drv.Cancel(e.ctx, second.ID, now); err != nil {
		t.Fatal(err)
	}
	third := e.insert(key)
	if third.ID == second.ID || third.ID == dead.ID {
		t.Fatalf("resubmission after cancel returned an old task %d", third.ID)
	}
	if e.total() != 3 {
		t.Fatalf("%d tasks, want 3", e.total())
	}
}

func testListAndCounts(t *testing.T, e *env) {
	var all []int64
	for i := range 6 {
		q, typ := "q1", "dt.a"
		if i%2 == 1 {
			q = "q2"
		}
		if i >= 4 {
			typ = "dt.b"
		}
		all = append(all, e.insert(func(p *driver.InsertParams) { p.Queue, p.Type = q, typ }).ID)
	}
	now := e.clock.Now()
	e.claimQueue("q1", "w", now, 1) // all[0] running
	slices.Reverse(all)
	list := func(p driver.ListParams) []int64 {
		t.Helper()
		rows, err := e.drv.List(e.ctx, p)
		if err != nil {
			t.Fatalf("list %+v: %v", p, err)
		}
		return ids(rows)
	}
	if got := list(driver.ListParams{}); !slices.Equal(got, all) {
		t.Fatalf("list all: %v, want %v (id descending)", got, all)
	}
	if got := list(driver.ListParams{Queue: "q2"}); !slices.Equal(got, []int64{all[0], all[2], all[4]}) {
		t.Fatalf("list q2: %v", got)
	}
	if got := list(driver.ListParams{Type: "dt.b"}); !slices.Equal(got, all[:2]) {
		t.Fatalf("list dt.b: %v", got)
	}
	if got := list(driver.ListParams{State: driver.StateRunning}); !slices.Equal(got, []int64{all[5]}) {
		t.Fatalf("list running: %v", got)
	}
	if got := list(driver.ListParams{Queue: "q1", Type: "dt.a", State: driver.StatePending}); !slices.Equal(got, []int64{all[3]}) {
		t.Fatalf("list q1/dt.a/pending: %v", got)
	}
	if got := list(driver.ListParams{Limit: 2}); !slices.Equal(got, all[:2]) {
		t.Fatalf("list limit 2: %v", got)
	}
	if got := list(driver.ListParams{BeforeID: all[1], Limit: 2}); !slices.Equal(got, all[2:4]) {
		t.Fatalf("list page 2: %v", got)
	}
	counts, err := e.drv.Counts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, c := range counts {
		got[c.Queue+"/"+string(c.State)] += c.Count
	}
	want := map[string]int64{"q1/running": 1, "q1/pending": 2, "q2/pending": 3}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

func testLeadership(t *testing.T, e *env) {
	lead := func(owner string, now time.Time) bool {
		t.Helper()
		ok, err := e.drv.Lead(e.ctx, driver.LeadParams{Name: "m", Owner: owner, Now: now, TTL: 10 * time.Second})
		if err != nil {
			t.Fatalf("lead %s: %v", owner, err)
		}
		return ok
	}
	t0 := e.clock.Now()
	if !lead("A", t0) {
		t.Fatal("A could not take a free leadership")
	}
	if lead("B", t0.Add(time.Second)) {
		t.Fatal("B took a held leadership")
	}
	if !lead("A", t0.Add(5*time.Second)) { // renews until t0+15s
		t.Fatal("A could not renew")
	}
	if lead("B", t0.Add(14*time.Second)) {
		t.Fatal("B took the leadership before the renewed lease expired")
	}
	if ok, _ := e.drv.Lead(e.ctx, driver.LeadParams{Name: "other", Owner: "B", Now: t0, TTL: time.Second}); !ok {
		t.Fatal("leaderships of different names must be independent")
	}
	if !lead("B", t0.Add(16*time.Second)) {
		t.Fatal("B could not take an expired leadership")
	}
	if lead("A", t0.Add(17*time.Second)) {
		t.Fatal("A kept leading after B took over")
	}
	if err := e.drv.Resign(e.ctx, "m", "A"); err != nil { // not A's: no effect
		t.Fatal(err)
	}
	if lead("A", t0.Add(18*time.Second)) {
		t.Fatal("a non-owner's Resign released the leadership")
	}
	if err := e.drv.Resign(e.ctx, "m", "B"); err != nil {
		t.Fatal(err)
	}
	if !lead("A", t0.Add(19*time.Second)) {
		t.Fatal("A could not lead after B resigned")
	}
}

func testInsertTx(t *testing.T, e *env) {
	db := e.db()
	tx, err := db.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.drv.InsertTx(e.ctx, tx, []driver.InsertParams{e.params(), e.params(func(p *driver.InsertParams) { p.IdemKey = "k:tx" })})
	if err != nil || len(res) != 2 {
		t.Fatalf("insert in tx: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := e.total(); n != 0 {
		t.Fatalf("%d tasks after rollback", n)
	}
	if _, err := e.drv.Get(e.ctx, res[0].Task.ID); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("rolled-back task: %v, want ErrNotFound", err)
	}
	if rows := e.claim("w", e.clock.Now().Add(time.Hour), 10); len(rows) != 0 {
		t.Fatalf("claimed rolled-back tasks %v", ids(rows))
	}
	// The rolled-back key is free; a committed insert exists and holds it.
	tx, err = db.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err = e.drv.InsertTx(e.ctx, tx, []driver.InsertParams{e.params(func(p *driver.InsertParams) { p.IdemKey = "k:tx" })})
	if err != nil || res[0].Duplicate {
		t.Fatalf("insert in tx after rollback: %+v, %v", res, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := e.get(res[0].Task.ID); got.State != driver.StatePending || got.IdemKey != "k:tx" {
		t.Fatalf("committed task: %+v", got)
	}
	dup, err := e.drv.Insert(e.ctx, []driver.InsertParams{e.params(func(p *driver.InsertParams) { p.IdemKey = "k:tx" })})
	if err != nil || !dup[0].Duplicate || dup[0].Task.ID != res[0].Task.ID {
		t.Fatalf("key of a committed tx insert not held: %+v, %v", dup, err)
	}
}

func testFinishTx(t *testing.T, e *env) {
	db := e.db()
	row := e.insert()
	now := e.clock.Now()
	e.claimOne("A", now)
	succeed := driver.Transition{ID: row.ID, Attempt: 1, State: driver.StateSucceeded, Result: []byte(`{"r":1}`)}
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

// testInsertTxConflict: an InsertTx that fails leaves nothing of its own in
// the caller's transaction, so a caller that commits its other work anyway
// does not commit half a batch.
func testInsertTxConflict(t *testing.T, e *env) {
	db := e.db()
	held := e.insert(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:held", "d1" })
	tx, err := db.BeginTx(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	_, err = e.drv.InsertTx(e.ctx, tx, []driver.InsertParams{
		e.params(func(p *driver.InsertParams) { p.Payload = []byte(`{"n":2}`) }),
		e.params(func(p *driver.InsertParams) { p.IdemKey, p.PayloadDigest = "k:held", "d2" }),
	})
	if !errors.Is(err, driver.ErrIdempotencyConflict) {
		t.Fatalf("InsertTx with a conflict: %v, want ErrIdempotencyConflict", err)
	}
	// The caller decides the conflict is fine and commits its other work.
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit after a failed InsertTx: %v", err)
	}
	if rows := e.all(); len(rows) != 1 || rows[0].ID != held.ID {
		t.Fatalf("a failed InsertTx committed part of its batch: tasks %v", ids(rows))
	}
}
