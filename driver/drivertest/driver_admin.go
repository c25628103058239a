package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Operator queries: counts by type, finished counts, place in line, list
// time filters, paused types, the node kept on success, and bulk requeue
// and purge of dead letters.

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
	requireCounts(t, "counts", counts, map[countKey]int64{
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
	cases := []struct {
		name string
		p    driver.ListParams
		want []int64
	}{
		{"after, inclusive", driver.ListParams{CreatedAfter: t1}, []int64{d.ID, c.ID, b.ID}},
		{"before, exclusive", driver.ListParams{CreatedBefore: t1}, []int64{a.ID}},
		{"window", driver.ListParams{CreatedAfter: t1, CreatedBefore: t2}, []int64{b.ID}},
		{"with queue", driver.ListParams{CreatedAfter: t2, Queue: "default"}, []int64{d.ID}},
		{"with before id", driver.ListParams{CreatedAfter: t0, BeforeID: c.ID}, []int64{b.ID, a.ID}},
		{"after the last", driver.ListParams{CreatedAfter: t2.Add(time.Second)}, []int64{}},
		{"before the first", driver.ListParams{CreatedBefore: t0}, []int64{}},
	}
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
	e.requireRejected("w1", t1, everyTransition(batched.ID, 1, t1))
	rescued, err := e.drv.Rescue(e.ctx, driver.RescueParams{Now: t1.Add(24 * time.Hour), Limit: 10,
		Backoff: func(string, int) time.Duration { return 0 }})
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

func testCountFinished(t *testing.T, e *env) {
	t0 := e.clock.Now()
	t1, t2, t3 := t0.Add(time.Minute), t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	e.taskIn(driver.StateSucceeded, t1, withTask("q1", "a"))
	d1 := e.taskIn(driver.StateDead, t2, withTask("q1", "b"))
	e.taskIn(driver.StateSucceeded, t3, withTask("q1", "a"))
	e.taskIn(driver.StateSucceeded, t2, withTask("q2", "a"))
	d2 := e.taskIn(driver.StateDead, t1, withTask("q2", "a"))
	e.taskIn(driver.StateCancelled, t3, withTask("q1", "a"))
	e.taskIn(driver.StatePending, t3, withTask("q1", "a"))
	e.taskIn(driver.StateRunning, t3, withTask("q1", "a"))
	count := func(since time.Time) map[countKey]int64 {
		t.Helper()
		rows, err := e.drv.CountFinished(e.ctx, since)
		if err != nil {
			t.Fatalf("count finished since %v: %v", since, err)
		}
		m := map[countKey]int64{}
		for _, r := range rows {
			k := countKey{queue: r.Queue, state: r.State}
			if _, dup := m[k]; dup {
				t.Fatalf("count finished repeats %v: %+v", k, rows)
			}
			m[k] = r.Count
		}
		return m
	}
	want := func(what string, got, want map[countKey]int64) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
		for k, n := range want {
			if got[k] != n {
				t.Fatalf("%s: got %v, want %v", what, got, want)
			}
		}
	}
	want("since t0", count(t0), map[countKey]int64{
		{queue: "q1", state: driver.StateSucceeded}: 2,
		{queue: "q1", state: driver.StateDead}:      1,
		{queue: "q2", state: driver.StateSucceeded}: 1,
		{queue: "q2", state: driver.StateDead}:      1,
	})
	want("since t2, inclusive", count(t2), map[countKey]int64{
		{queue: "q1", state: driver.StateSucceeded}: 1,
		{queue: "q1", state: driver.StateDead}:      1,
		{queue: "q2", state: driver.StateSucceeded}: 1,
	})
	want("after the last", count(t3.Add(time.Microsecond)), map[countKey]int64{})
	// A requeued dead letter is no longer finished.
	if _, err := e.drv.Retry(e.ctx, d2.ID, t3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.drv.Retry(e.ctx, d1.ID, t3); err != nil {
		t.Fatal(err)
	}
	want("after requeues", count(t0), map[countKey]int64{
		{queue: "q1", state: driver.StateSucceeded}: 2,
		{queue: "q2", state: driver.StateSucceeded}: 1,
	})
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
		n, err := e.drv.CountAhead(e.ctx, driver.AheadParams{Queue: r.Queue, Priority: r.Priority, RunAt: r.RunAt, ID: r.ID, Now: now})
		if err != nil {
			t.Fatalf("count ahead of %d: %v", r.ID, err)
		}
		return n
	}
	line := []*driver.TaskRow{b, d, a, c, i} // the claim order at now
	for want, r := range line {
		if got := ahead(r, now); got != int64(want) {
			t.Fatalf("task %d (priority %d, run_at %v): %d ahead, want %d", r.ID, r.Priority, r.RunAt, got, want)
		}
	}
	if got := ahead(f, now); got != 0 {
		t.Fatalf("only task of its queue: %d ahead, want 0", got)
	}
	// b is ready from its run_at on, inclusive.
	if got := ahead(a, b.RunAt); got != 2 {
		t.Fatalf("at b's run_at: %d ahead of a, want 2", got)
	}
	if got := ahead(a, b.RunAt.Add(-time.Second)); got != 1 {
		t.Fatalf("before b's run_at: %d ahead of a, want 1", got)
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

// match returns MatchParams for dead tasks with a limit of 100, changed by
// mod.
func match(mod func(*driver.MatchParams)) driver.MatchParams {
	p := driver.MatchParams{State: driver.StateDead, Limit: 100}
	if mod != nil {
		mod(&p)
	}
	return p
}

// matchSet is the fixture of the bulk tests: dead tasks of type x in queue
// q finished at t1, t2 and t3, and at t2 one each of another type, another
// queue and cancelled, plus a pending, a running and a succeeded task.
type matchSet struct {
	t1, t2, t3                      time.Time
	d1, d2, d3, dy, dr, c1, p, r, s *driver.TaskRow
}

func (e *env) matchSet() matchSet {
	e.t.Helper()
	t0 := e.clock.Now()
	m := matchSet{t1: t0.Add(time.Minute), t2: t0.Add(2 * time.Minute), t3: t0.Add(3 * time.Minute)}
	x := withTask("q", "x")
	m.d1 = e.taskIn(driver.StateDead, m.t1, x)
	m.d2 = e.taskIn(driver.StateDead, m.t2, x)
	m.d3 = e.taskIn(driver.StateDead, m.t3, x)
	m.dy = e.taskIn(driver.StateDead, m.t2, withTask("q", "y"))
	m.dr = e.taskIn(driver.StateDead, m.t2, withTask("r", "x"))
	m.c1 = e.taskIn(driver.StateCancelled, m.t2, x)
	m.p = e.taskIn(driver.StatePending, m.t2, x)
	m.r = e.taskIn(driver.StateRunning, m.t2, x)
	m.s = e.taskIn(driver.StateSucceeded, m.t2, x)
	e.clock.Advance(4 * time.Minute)
	return m
}

// requireStates fails unless each task is in its state.
func (e *env) requireStates(what string, want map[*driver.TaskRow]driver.State) {
	e.t.Helper()
	for row, st := range want {
		if got := e.get(row.ID); got.State != st {
			e.t.Fatalf("%s: task %d (%s %s) is %s, want %s", what, row.ID, row.Queue, row.Type, got.State, st)
		}
	}
}

// requireUntouched fails unless the pending, running and succeeded tasks of
// m are as they were.
func (e *env) requireUntouched(what string, m matchSet) {
	e.t.Helper()
	for _, before := range []*driver.TaskRow{m.p, m.r, m.s} {
		after := e.get(before.ID)
		if after.State != before.State || after.Attempt != before.Attempt || !after.UpdatedAt.Equal(before.UpdatedAt) {
			e.t.Fatalf("%s: %s task %d changed to %s attempt %d", what, before.State, before.ID, after.State, after.Attempt)
		}
	}
}

func testRetryMatchingLikeRetry(t *testing.T, e *env) {
	t1 := e.clock.Advance(time.Minute)
	one := e.taskIn(driver.StateDead, t1, withTask("default", "one"))
	two := e.taskIn(driver.StateDead, t1, withTask("default", "two"))
	t2 := e.clock.Advance(time.Minute)
	if _, err := e.drv.Retry(e.ctx, one.ID, t2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	n, err := e.drv.RetryMatching(e.ctx, match(func(p *driver.MatchParams) { p.Type = "two" }), t2)
	if err != nil || n != 1 {
		t.Fatalf("retry matching: moved %d, %v; want 1", n, err)
	}
	a, b := e.get(one.ID), e.get(two.ID)
	if b.State != driver.StatePending || b.Attempt != 0 || !b.RunAt.Equal(t2) || !b.FinishedAt.IsZero() ||
		!b.UpdatedAt.Equal(t2) || len(b.Errors) != 1 || b.LeaseOwner != "" || !b.LeaseExpiresAt.IsZero() {
		t.Fatalf("requeued: state %s attempt %d run_at %v finished %v updated %v errors %d owner %q",
			b.State, b.Attempt, b.RunAt, b.FinishedAt, b.UpdatedAt, len(b.Errors), b.LeaseOwner)
	}
	same := a.State == b.State && a.Attempt == b.Attempt && a.MaxAttempts == b.MaxAttempts && a.Fence == b.Fence &&
		a.RunAt.Equal(b.RunAt) && a.Timeout == b.Timeout && a.LeaseOwner == b.LeaseOwner &&
		a.LeaseExpiresAt.Equal(b.LeaseExpiresAt) && a.StartedAt.Equal(b.StartedAt) && a.AttemptedAt.Equal(b.AttemptedAt) &&
		a.FinishedAt.Equal(b.FinishedAt) && a.UpdatedAt.Equal(b.UpdatedAt) && len(a.Errors) == len(b.Errors) &&
		jsonEqual(a.Payload, b.Payload) && string(a.Result) == string(b.Result)
	if !same {
		t.Fatalf("RetryMatching and Retry differ:\n Retry    %+v\n Matching %+v", a, b)
	}
	if got := ids(e.claim("w", t2, 10)); !sameIDs(got, []int64{one.ID, two.ID}) {
		t.Fatalf("claim after requeue took %v", got)
	}
}

func testRetryMatchingFilters(t *testing.T, e *env) {
	m := e.matchSet()
	now := e.clock.Now()
	retry := func(what string, p driver.MatchParams, moved ...*driver.TaskRow) {
		t.Helper()
		n, err := e.drv.RetryMatching(e.ctx, p, now)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n != int64(len(moved)) {
			t.Fatalf("%s: moved %d, want %d", what, n, len(moved))
		}
		for _, r := range moved {
			if got := e.get(r.ID); got.State != driver.StatePending || got.Attempt != 0 || !got.RunAt.Equal(now) {
				t.Fatalf("%s: task %d is %s attempt %d run_at %v", what, r.ID, got.State, got.Attempt, got.RunAt)
			}
		}
	}
	for _, bad := range []driver.State{driver.StatePending, driver.StateRunning, driver.StateSucceeded, ""} {
		if _, err := e.drv.RetryMatching(e.ctx, match(func(p *driver.MatchParams) { p.State = bad }), now); err == nil {
			t.Fatalf("retry matching state %q: no error", bad)
		}
	}
	e.requireUntouched("after rejected states", m)
	retry("type, queue and window", match(func(p *driver.MatchParams) {
		p.Type, p.Queue, p.FinishedAfter, p.FinishedBefore = "x", "q", m.t2, m.t3
	}), m.d2)
	e.requireStates("after window", map[*driver.TaskRow]driver.State{
		m.d1: driver.StateDead, m.d3: driver.StateDead, m.dy: driver.StateDead, m.dr: driver.StateDead, m.c1: driver.StateCancelled,
	})
	retry("cancelled", match(func(p *driver.MatchParams) { p.State = driver.StateCancelled }), m.c1)
	retry("limit 1", match(func(p *driver.MatchParams) { p.Type, p.Limit = "x", 1 }), m.d1)
	retry("limit 2", match(func(p *driver.MatchParams) { p.Limit = 2 }), m.d3, m.dy)
	retry("the rest", match(func(p *driver.MatchParams) { p.Limit = 2 }), m.dr)
	retry("none left", match(nil))
	e.requireUntouched("at the end", m)
}

func testRetryMatchingSkipsHeldKeys(t *testing.T, e *env) {
	now := e.clock.Now()
	key := func(k string) func(*driver.InsertParams) {
		return func(p *driver.InsertParams) { p.IdemKey = k }
	}
	heldByPending := e.taskIn(driver.StateDead, now, key("k1"))
	e.taskIn(driver.StatePending, now, key("k1"))
	sharedA := e.taskIn(driver.StateDead, now, key("k2"))
	sharedB := e.taskIn(driver.StateDead, now, key("k2"))
	heldBySucceeded := e.taskIn(driver.StateDead, now, key("k3"))
	e.taskIn(driver.StateSucceeded, now, key("k3"))
	plain := e.taskIn(driver.StateDead, now)
	pairA := e.taskIn(driver.StateDead, now, key("k4"))
	pairB := e.taskIn(driver.StateDead, now, key("k4"))
	retry := func(limit int, moved ...*driver.TaskRow) {
		t.Helper()
		n, err := e.drv.RetryMatching(e.ctx, match(func(p *driver.MatchParams) { p.Limit = limit }), now)
		if err != nil {
			t.Fatalf("retry matching, limit %d: %v", limit, err)
		}
		if n != int64(len(moved)) {
			t.Fatalf("retry matching, limit %d: moved %d, want %d", limit, n, len(moved))
		}
		for _, r := range moved {
			if got := e.get(r.ID); got.State != driver.StatePending {
				t.Fatalf("retry matching, limit %d: task %d is %s, want pending", limit, r.ID, got.State)
			}
		}
	}
	// Tasks whose key is held do not use up the limit.
	retry(1, sharedA)
	// sharedB's key is now held by sharedA; of pairA and pairB, which share
	// a free key, only the first is requeued in one batch.
	retry(100, plain, pairA)
	retry(100)
	e.requireStates("held keys", map[*driver.TaskRow]driver.State{
		heldByPending: driver.StateDead, sharedB: driver.StateDead, heldBySucceeded: driver.StateDead, pairB: driver.StateDead,
	})
}

func testPurgeMatching(t *testing.T, e *env) {
	m := e.matchSet()
	purge := func(what string, p driver.MatchParams, gone ...*driver.TaskRow) {
		t.Helper()
		n, err := e.drv.PurgeMatching(e.ctx, p)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n != int64(len(gone)) {
			t.Fatalf("%s: deleted %d, want %d", what, n, len(gone))
		}
		for _, r := range gone {
			if _, err := e.drv.Get(e.ctx, r.ID); !errors.Is(err, driver.ErrNotFound) {
				t.Fatalf("%s: task %d not deleted: %v", what, r.ID, err)
			}
		}
	}
	for _, bad := range []driver.State{driver.StatePending, driver.StateRunning, driver.StateSucceeded, ""} {
		if _, err := e.drv.PurgeMatching(e.ctx, match(func(p *driver.MatchParams) { p.State = bad })); err == nil {
			t.Fatalf("purge state %q: no error", bad)
		}
	}
	if n := e.total(); n != 9 {
		t.Fatalf("%d tasks after rejected purges, want 9", n)
	}
	purge("type, queue and window", match(func(p *driver.MatchParams) {
		p.Type, p.Queue, p.FinishedAfter, p.FinishedBefore = "x", "q", m.t2, m.t3
	}), m.d2)
	e.requireStates("after window", map[*driver.TaskRow]driver.State{
		m.d1: driver.StateDead, m.d3: driver.StateDead, m.dy: driver.StateDead, m.dr: driver.StateDead, m.c1: driver.StateCancelled,
	})
	purge("cancelled", match(func(p *driver.MatchParams) { p.State = driver.StateCancelled }), m.c1)
	purge("limit 2", match(func(p *driver.MatchParams) { p.Limit = 2 }), m.d1, m.d3)
	e.requireStates("after limit", map[*driver.TaskRow]driver.State{m.dy: driver.StateDead, m.dr: driver.StateDead})
	purge("the rest", match(nil), m.dy, m.dr)
	purge("none left", match(nil))
	e.requireUntouched("at the end", m)
	if n := e.total(); n != 3 {
		t.Fatalf("%d tasks left, want 3", n)
	}
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

func sameSetting(a, b driver.Setting) bool {
	return a.Kind == b.Kind && a.Name == b.Name && a.Paused == b.Paused && a.Concurrency == b.Concurrency &&
		a.Timeout == b.Timeout && a.MaxAttempts == b.MaxAttempts && a.BackoffBase == b.BackoffBase &&
		a.BackoffMax == b.BackoffMax && a.UpdatedAt.Equal(b.UpdatedAt)
}

// patch applies p a second after the clock's last time and checks both the
// returned and the stored row against want (with p's kind, name and time).
func (e *env) patch(p driver.SettingPatch, want driver.Setting) {
	e.t.Helper()
	p.Now = e.clock.Advance(time.Second)
	want.Kind, want.Name, want.UpdatedAt = p.Kind, p.Name, p.Now
	got, err := e.drv.PatchSetting(e.ctx, p)
	if err != nil {
		e.t.Fatalf("patch %s %s: %v", p.Kind, p.Name, err)
	}
	if !sameSetting(*got, want) {
		e.t.Fatalf("patch returned\n %+v\nwant %+v", *got, want)
	}
	if stored := e.setting(p.Kind, p.Name); !sameSetting(stored, want) {
		e.t.Fatalf("patch stored\n %+v\nwant %+v", stored, want)
	}
}

// setting returns the stored setting kind/name, failing if there is none.
func (e *env) setting(kind driver.SettingKind, name string) driver.Setting {
	e.t.Helper()
	all, err := e.drv.ListSettings(e.ctx)
	if err != nil {
		e.t.Fatalf("list settings: %v", err)
	}
	for _, s := range all {
		if s.Kind == kind && s.Name == name {
			return s
		}
	}
	e.t.Fatalf("no setting %s %s in %+v", kind, name, all)
	return driver.Setting{}
}

func testPatchSetting(t *testing.T, e *env) {
	q, ty := driver.SettingQueue, driver.SettingType
	e.patch(driver.SettingPatch{Kind: q, Name: "emails", Paused: ptr(true)}, driver.Setting{Paused: true})
	e.patch(driver.SettingPatch{Kind: q, Name: "emails", Concurrency: ptr(4)}, driver.Setting{Paused: true, Concurrency: 4})
	e.patch(driver.SettingPatch{Kind: q, Name: "emails", Paused: ptr(false)}, driver.Setting{Concurrency: 4})
	queueRow := e.setting(q, "emails")

	all := driver.Setting{Timeout: 1500 * time.Millisecond, MaxAttempts: 7, BackoffBase: 2 * time.Second, BackoffMax: time.Minute}
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails", Timeout: ptr(all.Timeout), MaxAttempts: ptr(all.MaxAttempts),
		BackoffBase: ptr(all.BackoffBase), BackoffMax: ptr(all.BackoffMax)}, all)
	if got := e.setting(q, "emails"); !sameSetting(got, queueRow) {
		t.Fatalf("patching the type changed the queue of the same name: %+v", got)
	}
	cleared := all
	cleared.MaxAttempts = 0
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails", MaxAttempts: ptr(0)}, cleared)
	cleared.Timeout, cleared.Paused = 0, true
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails", Timeout: ptr(time.Duration(0)), Paused: ptr(true)}, cleared)
	cleared.BackoffBase, cleared.BackoffMax = 0, 0
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails", BackoffBase: ptr(time.Duration(0)), BackoffMax: ptr(time.Duration(0))}, cleared)
	// Nothing to change still records the time.
	e.patch(driver.SettingPatch{Kind: ty, Name: "emails"}, cleared)

	before, err := e.drv.ListSettings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.drv.PatchSetting(e.ctx, driver.SettingPatch{Kind: "node", Name: "x", Paused: ptr(true), Now: e.clock.Now()}); err == nil {
		t.Fatal("patch of an unknown kind: no error")
	}
	if after, err := e.drv.ListSettings(e.ctx); err != nil || len(after) != len(before) {
		t.Fatalf("rejected patch wrote: %d settings, want %d (%v)", len(after), len(before), err)
	}
}

func testPatchSettingConcurrent(t *testing.T, e *env) {
	now := e.clock.Now()
	for round := range 8 {
		name := fmt.Sprintf("type-%d", round)
		patches := []driver.SettingPatch{
			{Paused: ptr(true)}, {Concurrency: ptr(3)}, {Timeout: ptr(3 * time.Second)},
			{MaxAttempts: ptr(9)}, {BackoffBase: ptr(time.Second)}, {BackoffMax: ptr(time.Minute)},
		}
		if round%2 == 1 {
			// The row exists already: concurrent updates rather than inserts.
			if _, err := e.drv.PatchSetting(e.ctx, driver.SettingPatch{Kind: driver.SettingType, Name: name, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		startLine := make(chan struct{})
		errs := make(chan error, len(patches))
		for _, p := range patches {
			p.Kind, p.Name, p.Now = driver.SettingType, name, now
			go func() {
				<-startLine
				_, err := e.drv.PatchSetting(e.ctx, p)
				errs <- err
			}()
		}
		close(startLine)
		for range patches {
			if err := <-errs; err != nil {
				t.Fatalf("concurrent patch: %v", err)
			}
		}
		want := driver.Setting{Kind: driver.SettingType, Name: name, Paused: true, Concurrency: 3, Timeout: 3 * time.Second,
			MaxAttempts: 9, BackoffBase: time.Second, BackoffMax: time.Minute, UpdatedAt: now}
		if got := e.setting(driver.SettingType, name); !sameSetting(got, want) {
			t.Fatalf("round %d: a concurrent patch was lost:\n got %+v\nwant %+v", round, got, want)
		}
	}
}

func testListSettingsOrder(t *testing.T, e *env) {
	if all, err := e.drv.ListSettings(e.ctx); err != nil || len(all) != 0 {
		t.Fatalf("settings of a new database: %+v, %v", all, err)
	}
	now := e.clock.Now()
	for _, s := range []struct {
		kind driver.SettingKind
		name string
	}{{driver.SettingType, "b"}, {driver.SettingQueue, "z"}, {driver.SettingType, "a"}, {driver.SettingQueue, "a"}, {driver.SettingQueue, "B"}} {
		if _, err := e.drv.PatchSetting(e.ctx, driver.SettingPatch{Kind: s.kind, Name: s.name, Concurrency: ptr(1), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.drv.ListSettings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range all {
		got = append(got, string(s.Kind)+" "+s.Name)
		if s.Concurrency != 1 || !s.UpdatedAt.Equal(now) {
			t.Fatalf("listed %+v", s)
		}
	}
	if want := []string{"queue B", "queue a", "queue z", "type a", "type b"}; !slices.Equal(got, want) {
		t.Fatalf("settings listed as %q, want %q", got, want)
	}
}
