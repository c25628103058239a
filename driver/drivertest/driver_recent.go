package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Reads for the dashboard: RecentFinished (latency and retry figures from
// the newest finished tasks) and GetByKey (find a task by its key).

func testRecentFinished(t *testing.T, e *env) {
	t0 := e.clock.Now()
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	// ok: created at 0, due at 10, started at 15, succeeded at 20.
	ok := e.insert(func(p *driver.InsertParams) { p.Queue, p.Type, p.RunAt = "qa", "ta", at(10) })
	c := e.claimQueue("qa", "w", at(15), 1)
	if len(c) != 1 || c[0].ID != ok.ID {
		t.Fatalf("claim ok: %v", ids(c))
	}
	e.finish("w", at(20), driver.Transition{ID: ok.ID, Fence: c[0].Fence, State: driver.StateSucceeded})
	// dead: created at 0, first attempt at 1 fails, retried at 30, second
	// attempt at 32 dead-letters it at 40.
	dead := e.insert(func(p *driver.InsertParams) { p.Queue, p.Type = "qb", "tb" })
	c = e.claimQueue("qb", "w", at(1), 1)
	e.finish("w", at(2), driver.Transition{ID: dead.ID, Fence: c[0].Fence, State: driver.StatePending, RunAt: at(30),
		Error: attemptError(1, "w", at(1), at(2), "boom")})
	c = e.claimQueue("qb", "w", at(32), 1)
	if len(c) != 1 || c[0].ID != dead.ID {
		t.Fatalf("claim dead: %v", ids(c))
	}
	e.finish("w", at(40), driver.Transition{ID: dead.ID, Fence: c[0].Fence, State: driver.StateDead,
		Error: attemptError(2, "w", at(32), at(40), "boom")})
	// Not finished, or not succeeded or dead: never in the sample.
	e.taskIn(driver.StatePending, at(3))
	e.taskIn(driver.StateRunning, at(4))
	e.taskIn(driver.StateCancelled, at(50))
	// A third, older success.
	old := e.taskIn(driver.StateSucceeded, at(5), withTask("qa", "ta"))

	got, err := e.drv.RecentFinished(e.ctx, driver.RecentParams{Limit: 10})
	if err != nil {
		t.Fatalf("recent finished: %v", err)
	}
	if len(got) != 3 || got[0].ID != dead.ID || got[1].ID != ok.ID || got[2].ID != old.ID {
		t.Fatalf("recent finished: %+v, want tasks %d, %d, %d", got, dead.ID, ok.ID, old.ID)
	}
	want := []driver.FinishedSample{
		{ID: dead.ID, Queue: "qb", Type: "tb", State: driver.StateDead, Attempt: 2, CreatedAt: t0, RunAt: at(30), AttemptedAt: at(32), FinishedAt: at(40)},
		{ID: ok.ID, Queue: "qa", Type: "ta", State: driver.StateSucceeded, Attempt: 1, CreatedAt: t0, RunAt: at(10), AttemptedAt: at(15), FinishedAt: at(20)},
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.Queue != w.Queue || g.Type != w.Type || g.State != w.State || g.Attempt != w.Attempt ||
			!g.CreatedAt.Equal(w.CreatedAt) || !g.RunAt.Equal(w.RunAt) || !g.AttemptedAt.Equal(w.AttemptedAt) || !g.FinishedAt.Equal(w.FinishedAt) {
			t.Errorf("sample %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if got, err := e.drv.RecentFinished(e.ctx, driver.RecentParams{Limit: 1}); err != nil || len(got) != 1 || got[0].ID != dead.ID {
		t.Errorf("limit 1: %+v, %v; want task %d", got, err, dead.ID)
	}
	if got, err := e.drv.RecentFinished(e.ctx, driver.RecentParams{Limit: 10, Since: at(20)}); err != nil || len(got) != 2 {
		t.Errorf("since 20s: %+v, %v; want 2 tasks", got, err)
	}
	if got, err := e.drv.RecentFinished(e.ctx, driver.RecentParams{Limit: 10, Since: at(41)}); err != nil || len(got) != 0 {
		t.Errorf("since 41s: %+v, %v; want none", got, err)
	}
	for _, limit := range []int{0, -1, driver.MaxRecentLimit + 1} {
		if _, err := e.drv.RecentFinished(e.ctx, driver.RecentParams{Limit: limit}); err == nil {
			t.Errorf("limit %d: no error", limit)
		}
	}
}

func testGetByKey(t *testing.T, e *env) {
	now := e.clock.Now()
	key := func(k string) func(*driver.InsertParams) { return func(p *driver.InsertParams) { p.IdemKey = k } }
	pending := e.taskIn(driver.StatePending, now, key("k:pending"))
	succeeded := e.taskIn(driver.StateSucceeded, now, key("k:done"))
	e.taskIn(driver.StateDead, now, key("k:dead"))
	e.taskIn(driver.StateDead, now, key("k:again"))
	again := e.taskIn(driver.StatePending, now, key("k:again"))
	for k, want := range map[string]int64{"k:pending": pending.ID, "k:done": succeeded.ID, "k:again": again.ID} {
		got, err := e.drv.GetByKey(e.ctx, k)
		if err != nil || got.ID != want || got.IdemKey != k {
			t.Errorf("key %q: %+v, %v; want task %d", k, got, err, want)
			continue
		}
		if full := e.get(want); got.State != full.State || string(got.Payload) != string(full.Payload) || !got.CreatedAt.Equal(full.CreatedAt) {
			t.Errorf("key %q: %+v, want %+v", k, got, full)
		}
	}
	// A dead task released its key; no task has the others.
	for _, k := range []string{"k:dead", "k:none", "", "pending"} {
		if got, err := e.drv.GetByKey(e.ctx, k); !errors.Is(err, driver.ErrNotFound) {
			t.Errorf("key %q: %+v, %v; want ErrNotFound", k, got, err)
		}
	}
}

func testBulkByIDs(t *testing.T, e *env) {
	m := e.matchSet()
	now := e.clock.Now()
	// Bad ids change nothing.
	tooMany := make([]int64, driver.MaxBulkIDs+1)
	for i := range tooMany {
		tooMany[i] = int64(i + 1)
	}
	for _, bad := range [][]int64{tooMany, {m.d1.ID, 0}, {-1}} {
		if _, err := e.drv.RetryMatching(e.ctx, match(func(p *driver.Filter) { p.IDs = bad }), now); err == nil {
			t.Fatalf("retry %d ids: no error", len(bad))
		}
		if _, err := e.drv.PurgeMatching(e.ctx, match(func(p *driver.Filter) { p.IDs = bad })); err == nil {
			t.Fatalf("purge %d ids: no error", len(bad))
		}
	}
	if n := e.total(); n != 9 {
		t.Fatalf("%d tasks after rejected calls, want 9", n)
	}
	e.requireUntouched("after rejected ids", m)

	// Requeue: only the listed dead tasks; listed tasks of other states
	// and unknown ids are left alone.
	n, err := e.drv.RetryMatching(e.ctx, match(func(p *driver.Filter) {
		p.IDs = []int64{m.d3.ID, m.d1.ID, m.c1.ID, m.p.ID, m.r.ID, m.s.ID, m.d3.ID + 1000}
	}), now)
	if err != nil || n != 2 {
		t.Fatalf("retry by ids: moved %d, %v; want 2", n, err)
	}
	e.requireStates("after retry by ids", map[*driver.TaskRow]driver.State{
		m.d1: driver.StatePending, m.d3: driver.StatePending, m.d2: driver.StateDead, m.dy: driver.StateDead,
		m.dr: driver.StateDead, m.c1: driver.StateCancelled,
	})
	e.requireUntouched("after retry by ids", m)
	e.checkCounters("after retry by ids")

	// Ids combine with the other fields, and the limit takes the lowest.
	if n, err := e.drv.RetryMatching(e.ctx, match(func(p *driver.Filter) {
		p.IDs, p.Type = []int64{m.d2.ID, m.dy.ID}, "y"
	}), now); err != nil || n != 1 {
		t.Fatalf("retry by ids and type: moved %d, %v; want 1", n, err)
	}
	e.requireStates("after retry by ids and type", map[*driver.TaskRow]driver.State{m.dy: driver.StatePending, m.d2: driver.StateDead})

	// Purge: only the listed dead (or, when asked, cancelled) tasks.
	n, err = e.drv.PurgeMatching(e.ctx, match(func(p *driver.Filter) {
		p.IDs, p.Limit = []int64{m.dr.ID, m.d2.ID, m.d1.ID, m.c1.ID, m.s.ID, m.r.ID}, 1
	}))
	if err != nil || n != 1 {
		t.Fatalf("purge by ids, limit 1: deleted %d, %v; want 1", n, err)
	}
	if _, err := e.drv.Get(e.ctx, m.d2.ID); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("purge by ids, limit 1: task %d (the lowest id) not deleted: %v", m.d2.ID, err)
	}
	n, err = e.drv.PurgeMatching(e.ctx, match(func(p *driver.Filter) {
		p.IDs = []int64{m.dr.ID, m.d1.ID, m.c1.ID, m.s.ID, m.r.ID, m.p.ID}
	}))
	if err != nil || n != 1 {
		t.Fatalf("purge by ids: deleted %d, %v; want 1", n, err)
	}
	if _, err := e.drv.Get(e.ctx, m.dr.ID); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("purge by ids: task %d not deleted: %v", m.dr.ID, err)
	}
	n, err = e.drv.PurgeMatching(e.ctx, match(func(p *driver.Filter) {
		p.IDs, p.State = []int64{m.c1.ID, m.d1.ID}, driver.StateCancelled
	}))
	if err != nil || n != 1 {
		t.Fatalf("purge cancelled by ids: deleted %d, %v; want 1", n, err)
	}
	e.requireStates("after purge by ids", map[*driver.TaskRow]driver.State{
		m.d1: driver.StatePending, m.d3: driver.StatePending, m.dy: driver.StatePending,
	})
	e.requireUntouched("after purge by ids", m)
	if n := e.total(); n != 6 {
		t.Fatalf("%d tasks left, want 6", n)
	}
	e.checkCounters("after purge by ids")
}
