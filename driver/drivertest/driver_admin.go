package drivertest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Operator queries: counts by type, finished counts, place in line, list
// time filters, paused types and the node kept on success. Bulk requeue
// and purge are in driver_bulk.go, runtime settings in driver_settings.go.

// withTask sets the queue and type of an inserted task.
func withTask(queue, typ string) func(*driver.InsertParams) {
	return func(p *driver.InsertParams) { p.Queue, p.Type = queue, typ }
}

// taskIn inserts a task and takes it to state: pending tasks are scheduled
// a day after at (no claim takes them), running ones are claimed at at by
// "w", and succeeded, dead and cancelled ones finish at at. For the states
// that need a claim, no other task of its queue may be ready at at.
func (e *env) taskIn(state driver.State, at time.Time, mod ...func(*driver.InsertParams)) *driver.TaskRow {
	e.t.Helper()
	if state == driver.StatePending || state == driver.StateCancelled {
		mod = append(mod, func(p *driver.InsertParams) { p.RunAt = at.Add(24 * time.Hour) })
	}
	row := e.insert(mod...)
	switch state {
	case driver.StatePending:
		return row
	case driver.StateCancelled:
		if _, err := e.drv.Cancel(e.ctx, row.ID, at); err != nil {
			e.t.Fatalf("cancel task %d: %v", row.ID, err)
		}
		return e.get(row.ID)
	}
	got := e.claimQueue(row.Queue, "w", at, 1)
	if len(got) != 1 || got[0].ID != row.ID {
		e.t.Fatalf("taskIn: claimed %v, want [%d]", ids(got), row.ID)
	}
	tr := driver.Transition{ID: row.ID, Fence: got[0].Fence, State: state}
	switch state {
	case driver.StateRunning:
		return e.get(row.ID)
	case driver.StateDead:
		tr.Error = attemptError(got[0].Attempt, "w", at, at, "gave up")
	case driver.StateSucceeded:
	default:
		e.t.Fatalf("taskIn: unsupported state %s", state)
	}
	if applied := e.finish("w", at, tr); len(applied) != 1 {
		e.t.Fatalf("taskIn: finishing task %d as %s did not apply", row.ID, state)
	}
	row = e.get(row.ID)
	if row.State != state || !row.FinishedAt.Equal(at) {
		e.t.Fatalf("taskIn: task %d is %s finished %v, want %s at %v", row.ID, row.State, row.FinishedAt, state, at)
	}
	return row
}

type countKey struct {
	queue, typ string
	state      driver.State
}

// countMap indexes counts and fails the test on a repeated key.
func countMap(t *testing.T, counts []driver.QueueCount) map[countKey]int64 {
	t.Helper()
	m := map[countKey]int64{}
	for _, c := range counts {
		k := countKey{c.Queue, c.Type, c.State}
		if _, dup := m[k]; dup {
			t.Fatalf("counts repeat %+v: %+v", k, counts)
		}
		m[k] = c.Count
	}
	return m
}

func requireCounts(t *testing.T, what string, counts []driver.QueueCount, want map[countKey]int64) {
	t.Helper()
	got := countMap(t, counts)
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

func testCountsByType(t *testing.T, e *env) {
	now := e.clock.Now()
	e.insert(withTask("q1", "a"))
	e.insert(withTask("q1", "a"))
	e.insert(withTask("q1", "b"))
	e.taskIn(driver.StateRunning, now, withTask("q2", "a"))
	e.taskIn(driver.StateSucceeded, now, withTask("q2", "b"))
	e.taskIn(driver.StateDead, now, withTask("q2", "b"))
	counts, err := e.drv.Counts(e.ctx)
	if err != nil {
		t.Fatalf("counts: %v", err)
	}
	requireCounts(t, "counts", byState(counts), map[countKey]int64{
		{"q1", "a", driver.StatePending}:   2,
		{"q1", "b", driver.StatePending}:   1,
		{"q2", "a", driver.StateRunning}:   1,
		{"q2", "b", driver.StateSucceeded}: 1,
		{"q2", "b", driver.StateDead}:      1,
	})
}

func testListCreatedFilters(t *testing.T, e *env) {
	t0 := e.clock.Now()
	a := e.insert()
	t1 := e.clock.Advance(time.Second)
	b := e.insert()
	t2 := e.clock.Advance(time.Second)
	c := e.insert(withTask("other", "dt.task"))
	d := e.insert()
	for _, r := range []struct {
		row *driver.TaskRow
		at  time.Time
	}{{a, t0}, {b, t1}, {c, t2}, {d, t2}} {
		if !r.row.CreatedAt.Equal(r.at) {
			t.Fatalf("task %d created %v, want %v", r.row.ID, r.row.CreatedAt, r.at)
		}
	}
	cases := []listCase{
		{"after, inclusive", driver.Filter{CreatedAfter: t1}, []int64{d.ID, c.ID, b.ID}},
		{"before, exclusive", driver.Filter{CreatedBefore: t1}, []int64{a.ID}},
		{"window", driver.Filter{CreatedAfter: t1, CreatedBefore: t2}, []int64{b.ID}},
		{"with queue", driver.Filter{CreatedAfter: t2, Queue: "default"}, []int64{d.ID}},
		{"with before id", driver.Filter{CreatedAfter: t0, BeforeID: c.ID}, []int64{b.ID, a.ID}},
		{"after the last", driver.Filter{CreatedAfter: t2.Add(time.Second)}, []int64{}},
		{"before the first", driver.Filter{CreatedBefore: t0}, []int64{}},
	}
	checkListCases(t, e, cases)
}

// testListNameFilters: Types selects any of its types, ExcludeTypes and
// ExcludeQueues leave theirs out, and an entry ending in "*" is a prefix,
// compared case by case alike on every database.
func testListNameFilters(t *testing.T, e *env) {
	a := e.insert(withTask("default", "dt.a"))
	b := e.insert(withTask("default", "dt.b"))
	own := e.insert(withTask("keel", "keel.notify.ops"))
	drill := e.insert(withTask("default", "keel.drill"))
	upper := e.insert(withTask("other", "KEEL.x"))
	c := e.insert(withTask("other", "dt.c"))
	cases := []listCase{
		{"types", driver.Filter{Types: []string{"dt.a", "dt.c"}}, []int64{c.ID, a.ID}},
		{"types and type", driver.Filter{Type: "dt.a", Types: []string{"dt.a", "dt.b"}}, []int64{a.ID}},
		{"type prefix", driver.Filter{Types: []string{"keel.*"}}, []int64{drill.ID, own.ID}},
		{"prefix and name", driver.Filter{Types: []string{"dt.b", "keel.n*"}}, []int64{own.ID, b.ID}},
		{"exclude types", driver.Filter{ExcludeTypes: []string{"dt.a", "dt.b"}}, []int64{c.ID, upper.ID, drill.ID, own.ID}},
		{"exclude keel's own", driver.Filter{ExcludeTypes: []string{"keel.*"}, ExcludeQueues: []string{"keel"}}, []int64{c.ID, upper.ID, b.ID, a.ID}},
		{"exclude queues", driver.Filter{ExcludeQueues: []string{"other", "keel"}}, []int64{drill.ID, b.ID, a.ID}},
		{"include and exclude", driver.Filter{Types: []string{"dt.*"}, ExcludeTypes: []string{"dt.b"}, ExcludeQueues: []string{"other"}}, []int64{a.ID}},
		{"with queue and state", driver.Filter{Queue: "default", State: driver.StatePending, ExcludeTypes: []string{"keel.*"}}, []int64{b.ID, a.ID}},
		{"with before id", driver.Filter{ExcludeTypes: []string{"keel.*", "KEEL.*"}, BeforeID: c.ID}, []int64{b.ID, a.ID}},
		{"no match", driver.Filter{Types: []string{"dt.z*"}}, []int64{}},
	}
	checkListCases(t, e, cases)
}

// testListFinishedFilters: FinishedAfter is inclusive, FinishedBefore
// exclusive, and a task without finished_at (pending, running, or finished
// once and retried since) matches no finished bound.
func testListFinishedFilters(t *testing.T, e *env) {
	t0 := e.clock.Now()
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	a := e.taskIn(driver.StateDead, t1)
	b := e.taskIn(driver.StateSucceeded, t2)
	c := e.taskIn(driver.StateCancelled, t2, withTask("other", "dt.task"))
	d := e.taskIn(driver.StateDead, t3)
	p := e.taskIn(driver.StatePending, t2)
	r := e.taskIn(driver.StateRunning, t2)
	x := e.taskIn(driver.StateDead, t1, withTask("other", "dt.task"))
	e.clock.Advance(4 * time.Minute)
	if _, err := e.drv.Retry(e.ctx, x.ID, e.clock.Now()); err != nil {
		t.Fatalf("retry task %d: %v", x.ID, err)
	}
	if got := e.get(c.ID); !got.FinishedAt.Equal(t2) {
		t.Fatalf("cancelled task %d finished %v, want %v", c.ID, got.FinishedAt, t2)
	}
	for _, id := range []int64{p.ID, r.ID, x.ID} {
		if got := e.get(id); !got.FinishedAt.IsZero() {
			t.Fatalf("unfinished task %d (%s) has finished_at %v", id, got.State, got.FinishedAt)
		}
	}
	cases := []listCase{
		{"no bound", driver.Filter{}, []int64{x.ID, r.ID, p.ID, d.ID, c.ID, b.ID, a.ID}},
		{"after, inclusive", driver.Filter{FinishedAfter: t2}, []int64{d.ID, c.ID, b.ID}},
		{"before, exclusive", driver.Filter{FinishedBefore: t2}, []int64{a.ID}},
		{"window", driver.Filter{FinishedAfter: t2, FinishedBefore: t3}, []int64{c.ID, b.ID}},
		{"wide window", driver.Filter{FinishedAfter: t0, FinishedBefore: t3.Add(time.Hour)}, []int64{d.ID, c.ID, b.ID, a.ID}},
		{"with state", driver.Filter{FinishedAfter: t1, State: driver.StateDead}, []int64{d.ID, a.ID}},
		{"with queue", driver.Filter{FinishedAfter: t1, Queue: "other"}, []int64{c.ID}},
		{"with created", driver.Filter{FinishedBefore: t3, CreatedAfter: t0}, []int64{c.ID, b.ID, a.ID}},
		{"with before id", driver.Filter{FinishedAfter: t1, BeforeID: c.ID}, []int64{b.ID, a.ID}},
		{"after the last", driver.Filter{FinishedAfter: t3.Add(time.Second)}, []int64{}},
		{"before the first", driver.Filter{FinishedBefore: t1}, []int64{}},
	}
	checkListCases(t, e, cases)
}

func testClaimExcludeTypes(t *testing.T, e *env) {
	now := e.clock.Now()
	x := e.insert(func(p *driver.InsertParams) { p.Type, p.Priority = "x", 10 })
	y := e.insert(func(p *driver.InsertParams) { p.Type = "y" })
	z := e.insert(func(p *driver.InsertParams) { p.Type, p.Priority = "z", 5 })
	claim := func(exclude ...string) []int64 {
		t.Helper()
		rows, err := e.drv.Claim(e.ctx, driver.ClaimParams{Queue: "default", Limit: 10, ExcludeTypes: exclude,
			Owner: "w", Now: now, LeaseExpiresAt: now.Add(leaseTTL)})
		if err != nil {
			t.Fatalf("claim excluding %v: %v", exclude, err)
		}
		return ids(rows)
	}
	if got := claim("x", "z", "y"); len(got) != 0 {
		t.Fatalf("claim excluding every type took %v", got)
	}
	if got := claim("x", "z"); !slices.Equal(got, []int64{y.ID}) {
		t.Fatalf("claim excluding x and z took %v, want [%d]", got, y.ID)
	}
	for _, id := range []int64{x.ID, z.ID} {
		if r := e.get(id); r.State != driver.StatePending || r.Attempt != 0 || r.Fence != 0 || r.LeaseOwner != "" {
			t.Fatalf("excluded task %d changed: state %s attempt %d fence %d owner %q", id, r.State, r.Attempt, r.Fence, r.LeaseOwner)
		}
	}
	if got := claim("x"); !slices.Equal(got, []int64{z.ID}) {
		t.Fatalf("claim excluding x took %v, want [%d]", got, z.ID)
	}
	if got := claim("not-a-type"); !slices.Equal(got, []int64{x.ID}) {
		t.Fatalf("claim excluding another type took %v, want [%d]", got, x.ID)
	}
}

func testSucceedKeepsLeaseOwner(t *testing.T, e *env) {
	t0 := e.clock.Now()
	batched, withResult, dead, inTx := e.insert(), e.insert(), e.insert(), e.insert()
	if got := e.claim("w1", t0, 4); len(got) != 4 {
		t.Fatalf("claimed %d, want 4", len(got))
	}
	t1 := e.clock.Advance(time.Second)
	applied := e.finish("w1", t1,
		driver.Transition{ID: batched.ID, Fence: 1, State: driver.StateSucceeded},
		driver.Transition{ID: withResult.ID, Fence: 1, State: driver.StateSucceeded, Result: []byte(`1`)},
		driver.Transition{ID: dead.ID, Fence: 1, State: driver.StateDead, Error: attemptError(1, "w1", t0, t1, "x")})
	if len(applied) != 3 {
		t.Fatalf("finish applied %v", applied)
	}
	if dber, ok := e.drv.(driver.DBer); ok {
		tx, err := dber.DB().BeginTx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := e.drv.FinishTx(e.ctx, tx, "w1", t1, driver.Transition{ID: inTx.ID, Fence: 1, State: driver.StateSucceeded})
		if cerr := tx.Commit(); err == nil {
			err = cerr
		}
		if err != nil || !ok {
			t.Fatalf("FinishTx: applied %v, %v", ok, err)
		}
	} else {
		e.finish("w1", t1, driver.Transition{ID: inTx.ID, Fence: 1, State: driver.StateSucceeded})
	}
	succeeded := []int64{batched.ID, withResult.ID, inTx.ID}
	for _, id := range succeeded {
		r := e.get(id)
		if r.State != driver.StateSucceeded || r.LeaseOwner != "w1" || !r.LeaseExpiresAt.IsZero() || !r.FinishedAt.Equal(t1) {
			t.Fatalf("succeeded task %d: state %s owner %q lease %v finished %v, want owner w1 and no lease",
				id, r.State, r.LeaseOwner, r.LeaseExpiresAt, r.FinishedAt)
		}
	}
	if r := e.get(dead.ID); r.State != driver.StateDead || r.LeaseOwner != "" {
		t.Fatalf("dead task: state %s owner %q, want no owner", r.State, r.LeaseOwner)
	}
	// The kept owner grants nothing: the task is no longer running.
	held, err := e.drv.Heartbeat(e.ctx, driver.HeartbeatParams{Owner: "w1", IDs: succeeded, Now: t1, LeaseExpiresAt: t1.Add(time.Hour)})
	if err != nil || len(held) != 0 {
		t.Fatalf("heartbeat of succeeded tasks held %v, %v", held, err)
	}
	// The same success again, by its owner at its fence, is a finish
	// retried after a commit whose outcome it did not see: it reports
	// applied and writes nothing (see FinishAgain). Every other transition
	// is rejected, and so is a success in the caller's transaction.
	all := everyTransition(batched.ID, 1, t1)
	for _, k := range []string{"success", "success with result"} {
		if got := e.finish("w1", t1, all[k]); !slices.Equal(got, []int64{batched.ID}) {
			t.Fatalf("%s again by its owner: applied %v, want [%d]", k, got, batched.ID)
		}
		delete(all, k)
	}
	e.requireRejected("w1", t1, all)
	if dber, ok := e.drv.(driver.DBer); ok {
		tx, err := dber.DB().BeginTx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := e.drv.FinishTx(e.ctx, tx, "w1", t1, driver.Transition{ID: batched.ID, Fence: 1, State: driver.StateSucceeded})
		if cerr := tx.Commit(); err == nil {
			err = cerr
		}
		if err != nil || ok {
			t.Fatalf("success again in FinishTx: applied %v, %v", ok, err)
		}
	}
	if r := e.get(batched.ID); r.Result != nil || !r.UpdatedAt.Equal(t1) {
		t.Fatalf("a repeated success wrote: result %s updated %v", r.Result, r.UpdatedAt)
	}
	rescued, err := e.rescue(t1.Add(24*time.Hour), 10, 0)
	if err != nil || len(rescued) != 0 {
		t.Fatalf("rescue touched succeeded tasks: %v, %v", ids(rescued), err)
	}
	if _, err := e.drv.Cancel(e.ctx, batched.ID, t1); !errors.Is(err, driver.ErrWrongState) {
		t.Fatalf("cancel a succeeded task: %v, want ErrWrongState", err)
	}
	for _, id := range succeeded {
		if r := e.get(id); r.State != driver.StateSucceeded || r.LeaseOwner != "w1" || r.Attempt != 1 {
			t.Fatalf("task %d after rejected writes: state %s owner %q attempt %d", id, r.State, r.LeaseOwner, r.Attempt)
		}
	}
}

func testCountAhead(t *testing.T, e *env) {
	t0 := e.clock.Now()
	// Not pending: a running and a dead task of the queue, both of the
	// highest priority.
	e.insert(func(p *driver.InsertParams) { p.Priority = 100 })
	e.insert(func(p *driver.InsertParams) { p.Priority = 99 })
	top := e.claim("w", t0, 2)
	e.finish("w", t0, driver.Transition{ID: top[1].ID, Fence: 1, State: driver.StateDead, Error: attemptError(1, "w", t0, t0, "x")})
	now := t0.Add(time.Minute)
	at := func(prio int, runAt time.Time, queue string) *driver.TaskRow {
		return e.insert(func(p *driver.InsertParams) { p.Priority, p.RunAt, p.Queue = prio, runAt, queue })
	}
	a := at(0, t0, "default")
	b := at(5, t0.Add(10*time.Second), "default")
	c := at(0, t0, "default") // same run_at as a, after it by id
	d := at(0, t0.Add(-5*time.Second), "default")
	at(50, now.Add(time.Second), "default") // scheduled: not ready at now
	f := at(9, t0, "other")
	i := at(-1, t0.Add(-time.Minute), "default")
	ahead := func(r *driver.TaskRow, now time.Time) int64 {
		t.Helper()
		n, err := e.drv.CountAhead(e.ctx, driver.AheadParams{Queue: r.Queue, Priority: r.Priority, RunAt: r.RunAt, ID: r.ID,
			Now: now, From: t0.Add(-time.Hour), Limit: 1000})
		if err != nil {
			t.Fatalf("count ahead of %d: %v", r.ID, err)
		}
		return n
	}
	line := []*driver.TaskRow{b, d, a, c, i} // the claim order at now
	// CountAhead counts the task's own priority only (the live counters
	// give the higher ones).
	for r, want := range map[*driver.TaskRow]int64{b: 0, d: 0, a: 1, c: 2, i: 0} {
		if got := ahead(r, now); got != want {
			t.Fatalf("task %d (priority %d, run_at %v): %d ahead, want %d", r.ID, r.Priority, r.RunAt, got, want)
		}
	}
	if got := ahead(f, now); got != 0 {
		t.Fatalf("only task of its queue: %d ahead, want 0", got)
	}
	// d is ready from its run_at on, inclusive.
	if got := ahead(c, d.RunAt); got != 1 {
		t.Fatalf("at d's run_at: %d ahead of c, want 1 (d; a is not ready yet)", got)
	}
	if got := ahead(c, d.RunAt.Add(-time.Microsecond)); got != 0 {
		t.Fatalf("before d's run_at: %d ahead of c, want 0 (a and c are not ready either)", got)
	}
	// From bounds the range below, Limit caps the count.
	n, err := e.drv.CountAhead(e.ctx, driver.AheadParams{Queue: c.Queue, Priority: c.Priority, RunAt: c.RunAt, ID: c.ID,
		Now: now, From: t0, Limit: 1000})
	if err != nil || n != 1 {
		t.Fatalf("ahead of c from t0: %d, %v; want 1 (a; d is before t0)", n, err)
	}
	n, err = e.drv.CountAhead(e.ctx, driver.AheadParams{Queue: c.Queue, Priority: c.Priority, RunAt: c.RunAt, ID: c.ID,
		Now: now, From: t0.Add(-time.Hour), Limit: 1})
	if err != nil || n != 1 {
		t.Fatalf("ahead of c, limit 1: %d, %v; want 1", n, err)
	}
	// A claim takes them in the order CountAhead assumes.
	want := make([]int64, len(line))
	for k, r := range line {
		want[k] = r.ID
	}
	if got := ids(e.claim("w", now, 10)); !slices.Equal(got, want) {
		t.Fatalf("claim order %v, want %v", got, want)
	}
}

// listCase is a List call and the ids it must return, newest first.
type listCase struct {
	name string
	p    driver.Filter
	want []int64
}

func checkListCases(t *testing.T, e *env, cases []listCase) {
	t.Helper()
	for _, tc := range cases {
		tc.p.Limit = 100
		rows, err := e.drv.List(e.ctx, tc.p)
		if err != nil {
			t.Fatalf("%s: list: %v", tc.name, err)
		}
		if got := ids(rows); !slices.Equal(got, tc.want) {
			t.Fatalf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
	}
}
