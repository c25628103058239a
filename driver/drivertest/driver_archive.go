package drivertest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Retention and archival: Archive moves exactly the finished tasks past
// their cutoff to keel_archive, in batches, keeping the live counters
// right and adding no history; Get still finds them; PurgeArchive deletes
// only old archived rows; bad parameters write nothing.

// finishedTask inserts a task in queue "arch" at at and takes it to state
// (succeeded, dead or cancelled) at at.
func (e *env) finishedTask(state driver.State, at time.Time, mod ...func(*driver.InsertParams)) *driver.TaskRow {
	e.t.Helper()
	r := e.insert(append([]func(*driver.InsertParams){func(p *driver.InsertParams) {
		p.Queue, p.RunAt, p.Now = "arch", at, at
	}}, mod...)...)
	if state == driver.StateCancelled {
		if _, err := e.drv.Cancel(e.ctx, r.ID, at); err != nil {
			e.t.Fatalf("cancel task %d: %v", r.ID, err)
		}
		return e.get(r.ID)
	}
	got := e.claimQueue("arch", "w", at, 1)
	if len(got) != 1 || got[0].ID != r.ID {
		e.t.Fatalf("claimed %v, want task %d", ids(got), r.ID)
	}
	tr := driver.Transition{ID: r.ID, Fence: got[0].Fence, State: state, Result: []byte(`{"ok":true}`), Task: &got[0]}
	if state == driver.StateDead {
		tr.Result, tr.Error = nil, attemptError(got[0].Attempt, "w", at, at, "boom")
	}
	if applied := e.finish("w", at, tr); len(applied) != 1 {
		e.t.Fatalf("finish task %d as %s: not applied", r.ID, state)
	}
	return e.get(r.ID)
}

// archiveAll calls Archive with p until a batch moves fewer than p.Limit
// and returns the sum and the number of calls.
func (e *env) archiveAll(p driver.ArchiveParams) (driver.ArchiveResult, int) {
	e.t.Helper()
	var sum driver.ArchiveResult
	for calls := 1; ; calls++ {
		res, err := e.drv.Archive(e.ctx, p)
		if err != nil {
			e.t.Fatalf("archive (call %d): %v", calls, err)
		}
		if res.Total() > int64(p.Limit) {
			e.t.Fatalf("archive (call %d) moved %d, limit %d", calls, res.Total(), p.Limit)
		}
		sum.Add(res)
		if res.Total() < int64(p.Limit) {
			return sum, calls
		}
		if calls > 100 {
			e.t.Fatal("archive never moved fewer than its limit")
		}
	}
}

// requireArchived fails unless each task is archived at at, with every
// other field as it was (want).
func (e *env) requireArchived(step string, at time.Time, want ...*driver.TaskRow) {
	e.t.Helper()
	for _, w := range want {
		got := e.get(w.ID)
		if !got.ArchivedAt.Equal(at) {
			e.t.Fatalf("%s: task %d (%s) archived at %v, want %v", step, w.ID, w.State, got.ArchivedAt, at)
		}
		c := *got
		c.ArchivedAt = time.Time{}
		if !sameRow(&c, w) {
			e.t.Fatalf("%s: archived task %d changed\n got %+v\nwant %+v", step, w.ID, c, *w)
		}
	}
}

// sameRow reports whether two task rows are equal, JSON columns compared
// as JSON values (a database may normalise them).
func sameRow(a, b *driver.TaskRow) bool {
	for _, p := range [][2][]byte{{a.Payload, b.Payload}, {a.Result, b.Result}, {a.Meta, b.Meta}} {
		if (p[0] == nil) != (p[1] == nil) || p[0] != nil && !jsonEqual(p[0], p[1]) {
			return false
		}
	}
	ca, cb := *a, *b
	ca.Payload, ca.Result, ca.Meta, cb.Payload, cb.Result, cb.Meta = nil, nil, nil, nil, nil, nil
	return fmt.Sprintf("%+v", ca) == fmt.Sprintf("%+v", cb)
}

// requireLive fails unless each task is still in keel_tasks.
func (e *env) requireLive(step string, rows ...*driver.TaskRow) {
	e.t.Helper()
	for _, r := range rows {
		if got := e.get(r.ID); !got.ArchivedAt.IsZero() {
			e.t.Fatalf("%s: task %d (%s) archived, want it live", step, r.ID, r.State)
		}
	}
}

func testArchive(t *testing.T, e *env) {
	t0 := e.clock.Now()
	var oldDone, oldDead []*driver.TaskRow
	for i := range 5 {
		oldDone = append(oldDone, e.finishedTask(driver.StateSucceeded, t0.Add(time.Duration(i)*time.Second)))
	}
	for range 2 {
		oldDone = append(oldDone, e.finishedTask(driver.StateCancelled, t0))
	}
	for range 3 {
		oldDead = append(oldDead, e.finishedTask(driver.StateDead, t0))
	}
	t1 := e.clock.Advance(2 * time.Hour)
	newer := []*driver.TaskRow{
		e.finishedTask(driver.StateSucceeded, t1), e.finishedTask(driver.StateSucceeded, t1),
		e.finishedTask(driver.StateCancelled, t1), e.finishedTask(driver.StateDead, t1),
	}
	// Pending and running tasks, old by creation, are never archived.
	pending := e.insert(func(p *driver.InsertParams) { p.Queue, p.Now, p.RunAt = "idle", t0, t0 })
	e.insert(func(p *driver.InsertParams) { p.Queue, p.Now, p.RunAt = "run", t0, t0 })
	running := e.claimQueue("run", "w", t1, 1)
	if len(running) != 1 {
		t.Fatalf("claimed %d, want 1", len(running))
	}
	live := append([]*driver.TaskRow{pending, e.get(running[0].ID)}, newer...)
	e.checkCounters("before archival")
	minutes, err := e.drv.Minutes(e.ctx, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}

	// Succeeded and cancelled only (no dead cutoff), three at a time.
	cut := t1.Add(-time.Hour)
	at := t1.Add(time.Second)
	got, calls := e.archiveAll(driver.ArchiveParams{SucceededBefore: cut, Limit: 3, Now: at})
	if want := (driver.ArchiveResult{Succeeded: 5, Cancelled: 2}); got != want || calls != 3 {
		t.Fatalf("archived %+v in %d calls, want %+v in 3", got, calls, want)
	}
	e.requireArchived("succeeded and cancelled", at, oldDone...)
	e.requireLive("succeeded and cancelled", append(live, oldDead...)...)
	e.checkCounters("after archiving succeeded and cancelled")

	// Dead tasks by their own cutoff, which the newer dead task is not past.
	at2 := at.Add(time.Second)
	got, calls = e.archiveAll(driver.ArchiveParams{SucceededBefore: cut, DeadBefore: cut, Limit: 2, Now: at2})
	if want := (driver.ArchiveResult{Dead: 3}); got != want || calls != 2 {
		t.Fatalf("archived %+v in %d calls, want %+v in 2", got, calls, want)
	}
	e.requireArchived("dead", at2, oldDead...)
	e.requireArchived("dead: earlier ones stay", at, oldDone...)
	e.requireLive("dead", live...)
	e.checkCounters("after archiving dead")

	// List and Counts no longer see archived tasks; the history is as it was.
	listed := map[int64]bool{}
	for _, r := range e.all() {
		listed[r.ID] = true
	}
	if len(listed) != len(live) {
		t.Fatalf("list has %d tasks, want the %d live ones", len(listed), len(live))
	}
	for _, r := range live {
		if !listed[r.ID] {
			t.Fatalf("list misses live task %d", r.ID)
		}
	}
	if n := e.total(); n != int64(len(live)) {
		t.Fatalf("counts total %d, want %d", n, len(live))
	}
	after, err := e.drv.Minutes(e.ctx, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(minutes) {
		t.Fatalf("archival changed the history\n got %+v\nwant %+v", after, minutes)
	}

	// Archived tasks cannot be cancelled or requeued; unknown ids stay unknown.
	for _, r := range []*driver.TaskRow{oldDone[0], oldDone[5], oldDead[0]} {
		if _, err := e.drv.Cancel(e.ctx, r.ID, at2); !errors.Is(err, driver.ErrWrongState) {
			t.Fatalf("cancel archived task %d: %v, want ErrWrongState", r.ID, err)
		}
		if _, err := e.drv.Retry(e.ctx, r.ID, at2); !errors.Is(err, driver.ErrWrongState) {
			t.Fatalf("retry archived task %d: %v, want ErrWrongState", r.ID, err)
		}
	}
	e.requireArchived("after cancel and retry", at2, oldDead...)
	if _, err := e.drv.Get(e.ctx, 1<<40); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get unknown task: %v, want ErrNotFound", err)
	}
	// Nothing else is old enough.
	if got, _ := e.archiveAll(driver.ArchiveParams{SucceededBefore: cut, DeadBefore: cut, Limit: 10, Now: at2}); got.Total() != 0 {
		t.Fatalf("second round archived %+v, want nothing", got)
	}
	e.checkCounters("at the end")
}

// testArchiveIdempotencyKey: an archived task no longer holds its key, so
// the same key enqueues a new task, with a new id.
func testArchiveIdempotencyKey(t *testing.T, e *env) {
	t0 := e.clock.Now()
	key := func(p *driver.InsertParams) { p.IdemKey = "arch-key" }
	old := e.finishedTask(driver.StateSucceeded, t0, key)
	res, err := e.drv.Insert(e.ctx, []driver.InsertParams{e.params(key)})
	if err != nil || !res[0].Duplicate || res[0].Task.ID != old.ID {
		t.Fatalf("insert with the key of a succeeded task: %+v, %v; want a duplicate of %d", res, err, old.ID)
	}
	t1 := e.clock.Advance(time.Hour)
	got, _ := e.archiveAll(driver.ArchiveParams{SucceededBefore: t1, Limit: 10, Now: t1})
	if got.Succeeded != 1 {
		t.Fatalf("archived %+v, want the keyed task", got)
	}
	res, err = e.drv.Insert(e.ctx, []driver.InsertParams{e.params(key)})
	if err != nil || res[0].Duplicate {
		t.Fatalf("insert with the key of an archived task: %+v, %v; want a new task", res, err)
	}
	// The archived task had the highest id: the new one must not reuse it.
	if res[0].Task.ID <= old.ID {
		t.Fatalf("new task has id %d, not above the archived task's %d", res[0].Task.ID, old.ID)
	}
	if r := e.get(old.ID); r.ArchivedAt.IsZero() || r.State != driver.StateSucceeded {
		t.Fatalf("archived task %d: %+v", old.ID, r)
	}
	again, err := e.drv.Insert(e.ctx, []driver.InsertParams{e.params(key)})
	if err != nil || !again[0].Duplicate || again[0].Task.ID != res[0].Task.ID {
		t.Fatalf("insert again: %+v, %v; want a duplicate of the new task %d", again, err, res[0].Task.ID)
	}
	e.checkCounters("after re-enqueue")
}

func testPurgeArchive(t *testing.T, e *env) {
	t0 := e.clock.Now()
	first := []*driver.TaskRow{e.finishedTask(driver.StateSucceeded, t0), e.finishedTask(driver.StateDead, t0),
		e.finishedTask(driver.StateCancelled, t0)}
	t1 := e.clock.Advance(time.Hour)
	if got, _ := e.archiveAll(driver.ArchiveParams{SucceededBefore: t1, DeadBefore: t1, Limit: 10, Now: t1}); got.Total() != 3 {
		t.Fatalf("archived %+v, want 3", got)
	}
	second := e.finishedTask(driver.StateSucceeded, t1)
	t2 := e.clock.Advance(time.Hour)
	if got, _ := e.archiveAll(driver.ArchiveParams{SucceededBefore: t2, Limit: 10, Now: t2}); got.Total() != 1 {
		t.Fatalf("archived %+v, want 1", got)
	}
	liveOne := e.finishedTask(driver.StateSucceeded, t2)

	for _, bad := range []struct {
		before time.Time
		limit  int
	}{{time.Time{}, 10}, {t2, 0}, {t2, driver.MaxArchiveLimit + 1}, {t2, -1}} {
		if _, err := e.drv.PurgeArchive(e.ctx, bad.before, bad.limit); err == nil {
			t.Fatalf("purge archive before %v limit %d: no error", bad.before, bad.limit)
		}
	}
	e.requireArchived("after refused purges", t1, first...)

	// Rows archived before t1 + 1s: the first three, two at a time.
	var total int64
	for _, want := range []int64{2, 1, 0} {
		n, err := e.drv.PurgeArchive(e.ctx, t1.Add(time.Second), 2)
		if err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("purge archive deleted %d, want %d", n, want)
		}
		total += n
	}
	for _, r := range first {
		if _, err := e.drv.Get(e.ctx, r.ID); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("purged task %d: %v, want ErrNotFound", r.ID, err)
		}
	}
	e.requireArchived("newer archived row", t2, second)
	e.requireLive("live task", liveOne)
	e.checkCounters("after purge")
}

// testArchiveBadParams: parameters Archive cannot take are refused before
// anything is written.
func testArchiveBadParams(t *testing.T, e *env) {
	t0 := e.clock.Now()
	old := []*driver.TaskRow{e.finishedTask(driver.StateSucceeded, t0), e.finishedTask(driver.StateDead, t0)}
	t1 := e.clock.Advance(time.Hour)
	for name, p := range map[string]driver.ArchiveParams{
		"limit 0":      {SucceededBefore: t1, DeadBefore: t1, Now: t1},
		"limit -1":     {SucceededBefore: t1, DeadBefore: t1, Limit: -1, Now: t1},
		"limit 10001":  {SucceededBefore: t1, DeadBefore: t1, Limit: driver.MaxArchiveLimit + 1, Now: t1},
		"no cutoff":    {Limit: 10, Now: t1},
		"no now":       {SucceededBefore: t1, DeadBefore: t1, Limit: 10},
		"zero params":  {},
		"limit no now": {SucceededBefore: t1, Limit: 0},
	} {
		if res, err := e.drv.Archive(e.ctx, p); err == nil || res.Total() != 0 {
			t.Fatalf("%s: archived %+v, err %v; want an error and nothing moved", name, res, err)
		}
	}
	e.requireLive("after refused archival", old...)
	e.checkCounters("after refused archival")
}
