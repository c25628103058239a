package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// testEngineArchival: with a short retention, the leader moves exactly the
// finished tasks past it to the archive, in batches, while three workers
// keep running and new tasks arrive; archived tasks are still found by id;
// nothing archived is deleted until DeleteArchivedAfter is set, and then
// only what was archived long enough ago.
func testEngineArchival(t *testing.T, e *env) {
	handler := func(ctx context.Context, task *keel.Task[args]) error {
		if task.Args.N < 0 {
			return keel.Permanent(errors.New("bad input"))
		}
		return task.SetResult(map[string]int{"n": task.Args.N})
	}
	cfg := keel.Config{
		Queues:          map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 3}},
		RetainSucceeded: time.Hour, RetainDead: 7 * 24 * time.Hour,
		ArchiveInterval: 20 * time.Millisecond, ArchiveBatch: 4,
	}
	c := e.worker(cfg, handler)

	// Old tasks, finished at t0: 18 succeeded, 2 dead, 3 cancelled.
	var old, dead []*keel.TaskInfo
	for i := range 20 {
		n := i
		if i%10 == 9 {
			n = -i
		}
		info := e.enqueue(c, n)
		if n < 0 {
			dead = append(dead, info)
		} else {
			old = append(old, info)
		}
	}
	for i := range 3 {
		info := e.enqueue(c, 100+i, keel.Delay(time.Minute))
		if _, err := c.Cancel(e.ctx, info.ID); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		old = append(old, info)
	}
	for _, info := range append(old, dead...) {
		e.waitTask(info.ID, "finished", func(r *driver.TaskRow) bool { return !r.FinishedAt.IsZero() })
	}
	if got := c.Archived(); got.Succeeded+got.Cancelled+got.Dead != 0 {
		t.Fatalf("archived %+v before the retention passed", got)
	}

	// Two hours later the old tasks are past their retention; new tasks
	// keep arriving and running while they are archived.
	t1 := e.clock.Advance(2 * time.Hour)
	var newer []*keel.TaskInfo
	for i := range 30 {
		newer = append(newer, e.enqueue(c, 1000+i))
		time.Sleep(2 * time.Millisecond)
	}
	waitFor(t, "old tasks archived", func() bool {
		a := c.Archived()
		return a.Succeeded == 18 && a.Cancelled == 3
	})
	for _, info := range newer {
		e.waitState(info.ID, driver.StateSucceeded)
	}
	// A few more rounds: nothing else is old enough.
	batches := c.Archived().Batches
	waitFor(t, "three more archival rounds", func() bool { return c.Archived().Batches >= batches+3 })
	got := c.Archived()
	if got.Succeeded != 18 || got.Cancelled != 3 || got.Dead != 0 || got.Deleted != 0 {
		t.Fatalf("archived %+v, want 18 succeeded and 3 cancelled, none dead or deleted", got)
	}
	if got.Batches < 6 { // 21 tasks, 4 a batch
		t.Fatalf("archived in %d batches, want at least 6", got.Batches)
	}
	requireArchived := func(step string, at time.Time, infos ...*keel.TaskInfo) {
		t.Helper()
		for _, info := range infos {
			r, err := c.Get(e.ctx, info.ID)
			if err != nil {
				t.Fatalf("%s: get archived task %d: %v", step, info.ID, err)
			}
			if !r.Archived || !r.ArchivedAt.Equal(at) || r.FinishedAt.IsZero() {
				t.Fatalf("%s: task %d: archived %v at %v (finished %v), want archived at %v",
					step, info.ID, r.Archived, r.ArchivedAt, r.FinishedAt, at)
			}
		}
	}
	requireLive := func(step string, infos ...*keel.TaskInfo) {
		t.Helper()
		for _, info := range infos {
			if r, err := c.Get(e.ctx, info.ID); err != nil || r.Archived {
				t.Fatalf("%s: task %d: %+v, %v; want it live", step, info.ID, r, err)
			}
		}
	}
	requireArchived("first round", t1, old...)
	requireLive("first round", append(dead, newer...)...)
	if _, err := c.Retry(e.ctx, old[len(old)-1].ID); !errors.Is(err, keel.ErrWrongState) {
		t.Fatalf("retry of an archived cancelled task: %v, want ErrWrongState", err)
	}
	e.checkCounters("after archival")
	e.stop(c)

	// Deletion: archived rows older than DeleteArchivedAfter go, newer
	// archived rows and live tasks stay.
	cfg.DeleteArchivedAfter = 30 * time.Minute
	c2 := e.worker(cfg, handler)
	t2 := e.clock.Advance(90 * time.Minute) // the newer tasks are past retention now
	waitFor(t, "old archived tasks deleted, newer ones archived", func() bool {
		a := c2.Archived()
		return a.Deleted == 21 && a.Succeeded == 30
	})
	for _, info := range old {
		if _, err := c2.Get(e.ctx, info.ID); !errors.Is(err, keel.ErrNotFound) {
			t.Fatalf("deleted archived task %d: %v, want ErrNotFound", info.ID, err)
		}
	}
	requireArchived("second round", t2, newer...)
	requireLive("second round", dead...)
	e.checkCounters("after deletion")
}
