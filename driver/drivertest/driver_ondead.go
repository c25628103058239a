package drivertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
)

// Fallbacks when a task dies: a dead-lettering transition's FollowUps are
// inserted in its transaction, only when it applies.

// followUp is the follow-up insert of dead task id at fence.
func (e *env) followUp(id, fence int64) driver.InsertParams {
	return e.params(func(p *driver.InsertParams) {
		p.Type, p.Queue = "dt.failed", "fallback"
		p.Payload = fmt.Appendf(nil, `{"task_id":%d}`, id)
		p.IdemKey = fmt.Sprintf("keel.on_dead:dt.failed:%d:%d", id, fence)
		p.PayloadDigest = ""
	})
}

// followUps lists the follow-up tasks (queue fallback), newest first.
func (e *env) followUps() []driver.TaskRow {
	e.t.Helper()
	rows, err := e.drv.List(e.ctx, driver.Filter{Queue: "fallback", Limit: 1000})
	if err != nil {
		e.t.Fatalf("list follow-ups: %v", err)
	}
	return rows
}

// testFollowUpOnFinish: Finish and FinishTx insert a dead task's
// follow-up with the transition; a repeated (stale) write inserts nothing,
// a transition that does not apply inserts nothing, and a retry carries
// none.
func testFollowUpOnFinish(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
	other := e.insert(func(p *driver.InsertParams) { p.MaxAttempts = 1; p.Payload = []byte(`{"n":2}`) })
	now := e.clock.Now()
	claimed := e.claim("w1", now, 2)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d, want 2", len(claimed))
	}
	end := e.clock.Advance(time.Second)
	dead := driver.Transition{ID: row.ID, Fence: 1, State: driver.StateDead,
		Error: attemptError(1, "w1", now, end, "boom"), FollowUps: []driver.InsertParams{e.followUp(row.ID, 1)}}
	// The other task succeeds in the same batch: its transition carries
	// no follow-up.
	if applied := e.finish("w1", end, dead, driver.Transition{ID: other.ID, Fence: 1, State: driver.StateSucceeded}); len(applied) != 2 {
		t.Fatalf("applied %v, want both", applied)
	}
	fu := e.followUps()
	if len(fu) != 1 || fu[0].Type != "dt.failed" || fu[0].State != driver.StatePending || !jsonEqual(fu[0].Payload, fmt.Appendf(nil, `{"task_id":%d}`, row.ID)) {
		t.Fatalf("follow-ups %+v, want one pending dt.failed", fu)
	}
	// The same write again (a completer retrying a batch whose commit it
	// did not see): it finds its own write and reports it applied, and
	// nothing more is written or inserted.
	if applied := e.finish("w1", end, dead); !slices.Equal(applied, []int64{row.ID}) {
		t.Fatalf("a repeated dead-lettering reported %v, want its own earlier write [%d]", applied, row.ID)
	}
	// A stale owner's write does not apply either.
	if applied := e.finish("w2", end, dead); len(applied) != 0 {
		t.Fatalf("another owner's dead-lettering applied: %v", applied)
	}
	if fu := e.followUps(); len(fu) != 1 {
		t.Fatalf("%d follow-ups after repeated writes, want 1", len(fu))
	}
	if got := e.get(row.ID); got.State != driver.StateDead {
		t.Fatalf("state %s, want dead", got.State)
	}
	// The counters include the follow-up.
	if n := e.total(); n != 3 {
		t.Fatalf("counters total %d, want 3", n)
	}

	// FinishTx: the follow-up commits with the caller's transaction, and
	// a rolled-back transaction leaves neither.
	db, ok := e.drv.(driver.DBer)
	if !ok {
		return
	}
	third := e.insert(func(p *driver.InsertParams) { p.MaxAttempts = 1; p.Payload = []byte(`{"n":3}`) })
	r := e.claimOne("w1", end)
	if r.ID != third.ID {
		t.Fatalf("claimed %d, want %d", r.ID, third.ID)
	}
	tr := driver.Transition{ID: third.ID, Fence: 1, State: driver.StateDead, Error: attemptError(1, "w1", end, end, "boom"),
		FollowUps: []driver.InsertParams{e.followUp(third.ID, 1)}}
	for _, commit := range []bool{false, true} {
		tx, err := db.DB().BeginTx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := e.drv.FinishTx(e.ctx, tx, "w1", end, tr)
		if err != nil || !applied {
			tx.Rollback() //nolint:errcheck
			t.Fatalf("FinishTx: applied %v, %v", applied, err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if commit {
			want = 2
		}
		if fu := e.followUps(); len(fu) != want {
			t.Fatalf("commit %v: %d follow-ups, want %d", commit, len(fu), want)
		}
	}
	if n := e.total(); n != 5 {
		t.Fatalf("counters total %d, want 5", n)
	}
}

// testFollowUpOnRescue: a lease lost on the last attempt dead-letters the
// task with its follow-up, once, however often the rescue is written.
func testFollowUpOnRescue(t *testing.T, e *env) {
	row := e.insert(func(p *driver.InsertParams) { p.MaxAttempts = 1 })
	retried := e.insert(func(p *driver.InsertParams) { p.MaxAttempts = 3; p.Payload = []byte(`{"n":2}`) })
	e.claim("w1", e.clock.Now(), 2)
	now := e.clock.Advance(leaseTTL + time.Second)
	expired, at, err := e.drv.ListExpired(e.ctx, driver.ExpiredParams{Now: now, Limit: 10})
	if err != nil || len(expired) != 2 {
		t.Fatalf("expired %d, %v; want 2", len(expired), err)
	}
	var tasks []driver.RescueTask
	for i := range expired {
		tr := engine.ExpiredTransition(&expired[i], at, time.Second)
		if tr.State == driver.StateDead {
			tr.FollowUps = []driver.InsertParams{e.followUp(tr.ID, tr.Fence)}
		}
		tasks = append(tasks, driver.RescueTask{Owner: expired[i].LeaseOwner, Transition: tr})
	}
	rows, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: at, Tasks: tasks})
	if err != nil || len(rows) != 2 {
		t.Fatalf("rescued %d, %v; want 2", len(rows), err)
	}
	if _, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: at, Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
	fu := e.followUps()
	if len(fu) != 1 || !jsonEqual(fu[0].Payload, fmt.Appendf(nil, `{"task_id":%d}`, row.ID)) {
		t.Fatalf("follow-ups %+v, want one for task %d", fu, row.ID)
	}
	if got := e.get(row.ID); got.State != driver.StateDead {
		t.Fatalf("state %s, want dead", got.State)
	}
	if got := e.get(retried.ID); got.State != driver.StatePending {
		t.Fatalf("state %s, want pending", got.State)
	}
}

// testDeclareTypesOnDead: a type's on_dead, hook flag and brake
// thresholds are stored and read back; on_dead naming the type itself is
// refused and writes nothing.
func testDeclareTypesOnDead(t *testing.T, e *env) {
	a := driver.TypeDefaults{Name: "a.mail", OnDead: "a.mail.failed", OnDeadHook: true,
		Brake: driver.BrakeConfig{Window: 5, Threshold: 0.25, Cooldown: 2 * time.Second}}
	b := driver.TypeDefaults{Name: "b.bare", Brake: driver.BrakeConfig{Window: -1}}
	if err := e.drv.DeclareTypes(e.ctx, driver.DeclareTypesParams{Types: []driver.TypeDefaults{a, b}, Now: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	got, err := e.drv.ListTypes(e.ctx, nil)
	if err != nil || len(got) != 2 || !got[0].Equal(a) || !got[1].Equal(b) {
		t.Fatalf("listed %+v, %v; want %+v and %+v", got, err, a, b)
	}
	bad := driver.TypeDefaults{Name: "c.loop", OnDead: "c.loop"}
	if err := e.drv.DeclareTypes(e.ctx, driver.DeclareTypesParams{Types: []driver.TypeDefaults{bad}, Now: e.clock.Now()}); err == nil {
		t.Fatal("on_dead naming the type itself was accepted")
	}
	if got, _ := e.drv.ListTypes(e.ctx, []string{"c.loop"}); len(got) != 0 {
		t.Fatalf("a refused declaration wrote %+v", got)
	}
}
