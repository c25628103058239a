package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

func testCancelAndRetry(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.RunAt = p.Now.Add(time.Hour) })
	t1 := e.clock.Advance(time.Second)
	c, err := e.drv.Cancel(e.ctx, row.ID, t1)
	if err != nil {
		t.Fatalf("cancel pending: %v", err)
	}
	for _, r := range []*driver.TaskRow{c, e.get(row.ID)} {
		if r.State != driver.StateCancelled || !r.FinishedAt.Equal(t1) || len(r.Errors) != 0 {
			t.Fatalf("cancelled: state %s finished %v history %+v (a pending task ran no attempt)", r.State, r.FinishedAt, r.Errors)
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
	e.finish("w", t2, driver.Transition{ID: row.ID, Fence: 1, State: driver.StateDead, Error: ae})
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

// requireCancelledAttempt fails unless r's history ends with attempt n
// run by node from start, ended by a cancel at end.
func requireCancelledAttempt(t *testing.T, r *driver.TaskRow, n int, node string, start, end time.Time) {
	t.Helper()
	if len(r.Errors) == 0 {
		t.Fatalf("task %d (%s): no attempt in its history, want attempt %d cancelled", r.ID, r.State, n)
	}
	got := r.Errors[len(r.Errors)-1]
	if got.Attempt != n || got.Node != node || !got.Start.Equal(start) || !got.End.Equal(end) ||
		got.Outcome != driver.OutcomeCancelled || got.Error != driver.CancelledWhileRunning {
		t.Fatalf("task %d: last attempt %+v, want attempt %d on %s from %v to %v, outcome cancelled", r.ID, got, n, node, start, end)
	}
}

func testCancelRunningRejectsFinish(t *testing.T, e *env) {
	row := e.insert()
	t0 := e.clock.Now()
	e.claimOne("A", t0)
	t1 := e.clock.Advance(1500 * time.Millisecond)
	c, err := e.drv.Cancel(e.ctx, row.ID, t1)
	if err != nil {
		t.Fatalf("cancel running: %v", err)
	}
	if c.State != driver.StateCancelled || c.LeaseOwner != "" || !c.LeaseExpiresAt.IsZero() {
		t.Fatalf("cancelled running: state %s lease %q %v", c.State, c.LeaseOwner, c.LeaseExpiresAt)
	}
	// The timeline shows the attempt the cancel ended.
	requireCancelledAttempt(t, c, 1, "A", t0, t1)
	if len(c.Errors) != 1 {
		t.Fatalf("history %+v, want the cancelled attempt alone", c.Errors)
	}
	e.requireRejected("A", t0, everyTransition(row.ID, 1, t0))
	if held, _ := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "A", IDs: []int64{row.ID}, Now: t0, LeaseExpiresAt: t0.Add(time.Hour)}); len(held) != 0 {
		t.Fatal("heartbeat kept a cancelled task")
	}
	got := e.get(row.ID)
	if got.State != driver.StateCancelled || got.Result != nil || len(got.Errors) != 1 {
		t.Fatalf("after rejected finishes: state %s result %s errors %+v", got.State, got.Result, got.Errors)
	}
	requireCancelledAttempt(t, got, 1, "A", t0, t1)
	rows, err := e.rescue(t0.Add(time.Hour), 10, 0)
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
		driver.Transition{ID: succeeded.ID, Fence: 1, State: driver.StateSucceeded},
		driver.Transition{ID: dead.ID, Fence: 1, State: driver.StateDead, Error: attemptError(1, "w", now, now, "x")})
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
