package drivertest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// The live counters and history: every write path keeps keel_counts equal
// to a count of keel_tasks, and keel_minutes counts what happened, the
// same on every driver.

// checkCounters fails unless the live counters equal the tasks counted
// from List, and Reconcile finds nothing to correct.
func (e *env) checkCounters(step string) {
	e.t.Helper()
	want := map[string]int64{}
	for _, r := range e.all() {
		k := driver.CountRow{Queue: r.Queue, Type: r.Type, Kind: driver.CountKind(r.State, r.Attempt)}
		if r.State == driver.StatePending {
			k.Priority, k.Due = r.Priority, driver.DueMinute(r.RunAt)
		}
		want[fmt.Sprintf("%s/%s/%s/%d/%d", k.Queue, k.Type, k.Kind, k.Priority, k.Due)]++
	}
	rows, err := e.drv.Counts(e.ctx)
	if err != nil {
		e.t.Fatalf("%s: counts: %v", step, err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		k := fmt.Sprintf("%s/%s/%s/%d/%d", r.Queue, r.Type, r.Kind, r.Priority, r.Due)
		if _, dup := got[k]; dup {
			e.t.Fatalf("%s: counts repeat %s: %+v", step, k, rows)
		}
		got[k] = r.N
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Fatalf("%s: live counters\n got %v\nwant %v", step, got, want)
	}
	fixed, err := e.drv.Reconcile(e.ctx, driver.ReconcileParams{})
	if err != nil {
		e.t.Fatalf("%s: reconcile: %v", step, err)
	}
	if len(fixed) != 0 {
		e.t.Fatalf("%s: reconcile corrected %+v", step, fixed)
	}
}

func testLiveCounters(t *testing.T, e *env) {
	t0 := e.clock.Now()
	e.checkCounters("empty")
	a := e.insert(func(p *driver.InsertParams) { p.Priority = 3 })
	e.insert(func(p *driver.InsertParams) { p.Type = "dt.other" })
	e.insert(func(p *driver.InsertParams) { p.RunAt = t0.Add(time.Hour) }) // scheduled
	keyed := e.insert(func(p *driver.InsertParams) { p.IdemKey = "k1" })
	e.insert()
	res, err := e.drv.Insert(e.ctx, []driver.InsertParams{e.params(func(p *driver.InsertParams) { p.IdemKey = "k1" })})
	if err != nil || !res[0].Duplicate || res[0].Task.ID != keyed.ID {
		t.Fatalf("duplicate insert: %+v, %v", res, err)
	}
	e.checkCounters("inserts")

	t1 := t0.Add(time.Second)
	got := e.claim("w", t1, 2)
	if len(got) != 2 || got[0].ID != a.ID {
		t.Fatalf("claimed %v, want 2 starting with %d", ids(got), a.ID)
	}
	e.checkCounters("claim")
	// A success without Task (the driver reads it), a retry with it.
	e.finish("w", t1, driver.Transition{ID: got[0].ID, Fence: got[0].Fence, State: driver.StateSucceeded},
		driver.Transition{ID: got[1].ID, Fence: got[1].Fence, State: driver.StatePending, RunAt: t1.Add(time.Minute),
			Error: attemptError(got[1].Attempt, "w", t1, t1, "boom"), Task: &got[1]})
	e.checkCounters("success and retry")

	t2 := t1.Add(2 * time.Minute)
	got = e.claim("w", t2, 3) // the two ready ones and the retried task
	if len(got) != 3 {
		t.Fatalf("claimed %v, want 3", ids(got))
	}
	e.checkCounters("second claim")
	e.finish("w", t2,
		driver.Transition{ID: got[0].ID, Fence: got[0].Fence, State: driver.StatePending, RunAt: t2.Add(time.Minute),
			Refund: true, Snooze: true, Task: &got[0]},
		driver.Transition{ID: got[1].ID, Fence: got[1].Fence, State: driver.StateDead,
			Error: attemptError(got[1].Attempt, "w", t2, t2, "gave up")},
		driver.Transition{ID: got[2].ID, Fence: got[2].Fence, State: driver.StatePending, RunAt: t2, Refund: true})
	e.checkCounters("snooze, dead, release")

	// Operators: cancel a pending and a running task, retry the dead one.
	running := e.claimOne("w", t2)
	if _, err := e.drv.Cancel(e.ctx, running.ID, t2); err != nil {
		t.Fatal(err)
	}
	pending := e.all()
	var scheduled *driver.TaskRow
	for i := range pending {
		if pending[i].State == driver.StatePending && pending[i].RunAt.After(t2) {
			scheduled = &pending[i]
		}
	}
	if scheduled == nil {
		t.Fatal("no scheduled task left")
	}
	if _, err := e.drv.Cancel(e.ctx, scheduled.ID, t2); err != nil {
		t.Fatal(err)
	}
	if _, err := e.drv.Retry(e.ctx, got[1].ID, t2); err != nil {
		t.Fatal(err)
	}
	e.checkCounters("cancel and retry")

	// A lost lease, rescued.
	lost := e.claimOne("gone", t2)
	if _, err := e.rescue(t2.Add(2*leaseTTL), 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	if r := e.get(lost.ID); r.State != driver.StatePending {
		t.Fatalf("rescued task is %s", r.State)
	}
	e.checkCounters("rescue")
}

func testLiveCountersBulk(t *testing.T, e *env) {
	now := e.clock.Now()
	for i := range 6 {
		state := driver.StateDead
		if i%3 == 0 {
			state = driver.StateCancelled
		}
		e.taskIn(state, now, withTask([]string{"q1", "q2"}[i%2], "a"))
	}
	e.checkCounters("dead and cancelled")
	n, err := e.drv.RetryMatching(e.ctx, driver.Filter{State: driver.StateDead, Queue: "q1", Limit: 100}, now)
	if err != nil || n == 0 {
		t.Fatalf("retry matching: %d, %v", n, err)
	}
	e.checkCounters("retry matching")
	n, err = e.drv.PurgeMatching(e.ctx, driver.Filter{State: driver.StateDead, Limit: 100})
	if err != nil || n == 0 {
		t.Fatalf("purge matching: %d, %v", n, err)
	}
	n, err = e.drv.PurgeMatching(e.ctx, driver.Filter{State: driver.StateCancelled, Limit: 1})
	if err != nil || n != 1 {
		t.Fatalf("purge one cancelled: %d, %v", n, err)
	}
	e.checkCounters("purges")
}

// testHistory checks keel_minutes row by row after a scripted minute of
// work, on minute boundaries of the suite's clock.
func testHistory(t *testing.T, e *env) {
	m0 := driver.DueMinute(e.clock.Now()) + 1
	at := func(minute int64, sec int) time.Time { return time.Unix(minute*60+int64(sec), 0).UTC() }
	ins := func(when time.Time, mod ...func(*driver.InsertParams)) *driver.TaskRow {
		return e.insert(append(mod, func(p *driver.InsertParams) { p.Now, p.RunAt = when, when })...)
	}
	ins(at(m0, 1))
	ins(at(m0, 2))
	ins(at(m0, 3), func(p *driver.InsertParams) { p.Type = "dt.b" })
	k := ins(at(m0, 4), func(p *driver.InsertParams) { p.IdemKey = "h" })
	dup := e.params(func(p *driver.InsertParams) { p.IdemKey, p.Now, p.RunAt = "h", at(m0+1, 0), at(m0+1, 0) })
	if res, err := e.drv.Insert(e.ctx, []driver.InsertParams{dup}); err != nil || !res[0].Duplicate || res[0].Task.ID != k.ID {
		t.Fatalf("duplicate: %+v %v", res, err)
	}
	// Minute m0+1: four claims; at +10s a success and a failure, at +25s a
	// dead letter, a snooze (not an ended attempt) and a cancel of the
	// fourth (ended, cancelled).
	got := e.claim("w", at(m0+1, 5), 4)
	if len(got) != 4 {
		t.Fatalf("claimed %d, want 4", len(got))
	}
	byType := map[string][]driver.TaskRow{}
	for _, r := range got {
		byType[r.Type] = append(byType[r.Type], r)
	}
	a := byType["dt.task"]
	b := byType["dt.b"][0]
	e.finish("w", at(m0+1, 15),
		driver.Transition{ID: a[0].ID, Fence: a[0].Fence, State: driver.StateSucceeded},
		driver.Transition{ID: a[1].ID, Fence: a[1].Fence, State: driver.StatePending, RunAt: at(m0+3, 0),
			Error: attemptError(1, "w", at(m0+1, 5), at(m0+1, 15), "x")})
	e.finish("w", at(m0+1, 30),
		driver.Transition{ID: b.ID, Fence: b.Fence, State: driver.StateDead, Error: attemptError(1, "w", at(m0+1, 5), at(m0+1, 30), "y")},
		driver.Transition{ID: a[2].ID, Fence: a[2].Fence, State: driver.StatePending, RunAt: at(m0+2, 0), Refund: true, Snooze: true})
	if _, err := e.drv.Cancel(e.ctx, a[2].ID, at(m0+1, 40)); err != nil {
		t.Fatal(err)
	}
	rows, err := e.drv.Minutes(e.ctx, at(m0, 30))
	if err != nil {
		t.Fatal(err)
	}
	ms := func(minute int64, sec int) int64 { return at(minute, sec).UnixMilli() }
	want := []driver.MinuteRow{
		{Minute: m0, Queue: "default", Type: "dt.b", Enqueued: 1},
		{Minute: m0, Queue: "default", Type: "dt.task", Enqueued: 3},
		{Minute: m0 + 1, Queue: "default", Type: "dt.b", Attempts: 1, Ended: 1, Failed: 1, Dead: 1,
			DurationMS: 25000, FirstMS: ms(m0+1, 30), LastMS: ms(m0+1, 30)},
		{Minute: m0 + 1, Queue: "default", Type: "dt.task", Hits: 1, Attempts: 3, Ended: 2, Failed: 1, Succeeded: 1,
			Cancelled: 1, DurationMS: 20000, FirstMS: ms(m0+1, 15), LastMS: ms(m0+1, 15)},
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("history\n got %+v\nwant %+v", rows, want)
	}
	// Folding the rows a driver keeps per connection changes no sum.
	if _, err := e.drv.Reconcile(e.ctx, driver.ReconcileParams{Now: at(m0+5, 0)}); err != nil {
		t.Fatal(err)
	}
	if rows, err = e.drv.Minutes(e.ctx, at(m0, 30)); err != nil || !slices.Equal(rows, want) {
		t.Fatalf("history after folding\n got %+v (%v)\nwant %+v", rows, err, want)
	}
	// Minutes before since are not returned; Reconcile drops them.
	if _, err := e.drv.Reconcile(e.ctx, driver.ReconcileParams{MinutesBefore: at(m0+1, 0)}); err != nil {
		t.Fatal(err)
	}
	if rows, err = e.drv.Minutes(e.ctx, time.Time{}); err != nil || len(rows) != 2 || rows[0].Minute != m0+1 {
		t.Fatalf("after dropping minute %d: %+v, %v", m0, rows, err)
	}
}
