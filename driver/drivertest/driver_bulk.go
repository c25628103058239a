package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Bulk requeue and purge of dead letters: RetryMatching and PurgeMatching.

// match returns MatchParams for dead tasks with a limit of 100, changed by
// mod.
func match(mod func(*driver.Filter)) driver.Filter {
	p := driver.Filter{State: driver.StateDead, Limit: 100}
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
	n, err := e.drv.RetryMatching(e.ctx, match(func(p *driver.Filter) { p.Type = "two" }), t2)
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
	retry := func(what string, p driver.Filter, moved ...*driver.TaskRow) {
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
		if _, err := e.drv.RetryMatching(e.ctx, match(func(p *driver.Filter) { p.State = bad }), now); err == nil {
			t.Fatalf("retry matching state %q: no error", bad)
		}
	}
	e.requireUntouched("after rejected states", m)
	retry("type, queue and window", match(func(p *driver.Filter) {
		p.Type, p.Queue, p.FinishedAfter, p.FinishedBefore = "x", "q", m.t2, m.t3
	}), m.d2)
	e.requireStates("after window", map[*driver.TaskRow]driver.State{
		m.d1: driver.StateDead, m.d3: driver.StateDead, m.dy: driver.StateDead, m.dr: driver.StateDead, m.c1: driver.StateCancelled,
	})
	retry("cancelled", match(func(p *driver.Filter) { p.State = driver.StateCancelled }), m.c1)
	retry("limit 1", match(func(p *driver.Filter) { p.Type, p.Limit = "x", 1 }), m.d1)
	retry("limit 2", match(func(p *driver.Filter) { p.Limit = 2 }), m.d3, m.dy)
	retry("the rest", match(func(p *driver.Filter) { p.Limit = 2 }), m.dr)
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
		n, err := e.drv.RetryMatching(e.ctx, match(func(p *driver.Filter) { p.Limit = limit }), now)
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
	purge := func(what string, p driver.Filter, gone ...*driver.TaskRow) {
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
		if _, err := e.drv.PurgeMatching(e.ctx, match(func(p *driver.Filter) { p.State = bad })); err == nil {
			t.Fatalf("purge state %q: no error", bad)
		}
	}
	if n := e.total(); n != 9 {
		t.Fatalf("%d tasks after rejected purges, want 9", n)
	}
	purge("type, queue and window", match(func(p *driver.Filter) {
		p.Type, p.Queue, p.FinishedAfter, p.FinishedBefore = "x", "q", m.t2, m.t3
	}), m.d2)
	e.requireStates("after window", map[*driver.TaskRow]driver.State{
		m.d1: driver.StateDead, m.d3: driver.StateDead, m.dy: driver.StateDead, m.dr: driver.StateDead, m.c1: driver.StateCancelled,
	})
	purge("cancelled", match(func(p *driver.Filter) { p.State = driver.StateCancelled }), m.c1)
	purge("limit 2", match(func(p *driver.Filter) { p.Limit = 2 }), m.d1, m.d3)
	e.requireStates("after limit", map[*driver.TaskRow]driver.State{m.dy: driver.StateDead, m.dr: driver.StateDead})
	purge("the rest", match(nil), m.dy, m.dr)
	purge("none left", match(nil))
	e.requireUntouched("at the end", m)
	if n := e.total(); n != 3 {
		t.Fatalf("%d tasks left, want 3", n)
	}
}
