package drivertest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// The run_at range keel documents (RunAt): what MariaDB's DATETIME(6)
// holds, the narrowest of the three databases.
var (
	firstRunAt = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	lastRunAt  = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// edgeRunAts are the ends of the range and their neighbours inside it; the
// odd microseconds catch arithmetic that rounds far offsets.
var edgeRunAts = []time.Time{
	firstRunAt, firstRunAt.Add(time.Microsecond), lastRunAt.Add(-time.Microsecond), lastRunAt,
}

// testRunAtRange: run times at both ends of the range are stored exactly,
// whether inserted one by one, as a batch (PostgreSQL writes batches with
// COPY) or set by a retry, though they lie thousands of years from now.
func testRunAtRange(t *testing.T, e *env) {
	check := func(how string, id int64, want time.Time) {
		t.Helper()
		if got := e.get(id).RunAt; !got.Equal(want) {
			t.Errorf("%s: run_at stored as %v, want %v", how, got.UTC(), want)
		}
	}
	for _, at := range edgeRunAts {
		row := e.insert(func(p *driver.InsertParams) { p.RunAt = at })
		if !row.RunAt.Equal(at) {
			t.Errorf("insert: run_at returned as %v, want %v", row.RunAt.UTC(), at)
		}
		check("insert", row.ID, at)
	}

	var batch []driver.InsertParams
	for i := range 2 * len(edgeRunAts) {
		batch = append(batch, e.params(func(p *driver.InsertParams) { p.RunAt = edgeRunAts[i%len(edgeRunAts)] }))
	}
	res, err := e.drv.Insert(e.ctx, batch)
	if err != nil {
		t.Fatalf("insert batch: %v", err)
	}
	for i, r := range res {
		if !r.Task.RunAt.Equal(batch[i].RunAt) {
			t.Errorf("batch insert %d: run_at returned as %v, want %v", i, r.Task.RunAt.UTC(), batch[i].RunAt)
		}
		check("batch insert", r.Task.ID, batch[i].RunAt)
	}

	// Retries scheduled at the ends of the range.
	now := e.clock.Now()
	var ids []int64
	for range edgeRunAts {
		ids = append(ids, e.insert().ID)
	}
	claimed := e.claim("w1", now, len(ids))
	if len(claimed) != len(ids) {
		t.Fatalf("claimed %d tasks, want %d", len(claimed), len(ids))
	}
	var ts []driver.Transition
	want := map[int64]time.Time{}
	for i, r := range claimed {
		ts = append(ts, driver.Transition{ID: r.ID, Fence: r.Fence, State: driver.StatePending, RunAt: edgeRunAts[i],
			Error: attemptError(1, "w1", now, now, "again")})
		want[r.ID] = edgeRunAts[i]
	}
	if applied := e.finish("w1", now, ts...); len(applied) != len(ts) {
		t.Fatalf("finish applied %d of %d retries", len(applied), len(ts))
	}
	for id, at := range want {
		check("retry", id, at)
	}
}

// enqueueRunAts are the ends of the range an enqueue may ask for, and the
// microseconds around driver.HeldUntil (the last whole second of the year
// 9999), keel's own mark, which it may not.
var enqueueRunAts = []time.Time{
	firstRunAt, firstRunAt.Add(time.Microsecond), lastRunAt.Add(-time.Microsecond), lastRunAt,
	driver.HeldUntil.Add(-time.Microsecond), driver.HeldUntil.Add(time.Microsecond),
}

// testEngineRunAtRange: keel stores RunAt exactly at both ends of the
// documented range and refuses a time beyond either end, or keel's mark
// of a held task, with ErrInvalid naming run_at, writing nothing.
func testEngineRunAtRange(t *testing.T, e *env) {
	c := e.enqueuer()
	var jobs []keel.TaskSpec
	for _, at := range enqueueRunAts {
		info := e.enqueue(c, 1, keel.RunAt(at))
		if !info.RunAt.Equal(at) || !e.get(info.ID).RunAt.Equal(at) {
			t.Errorf("RunAt(%v): returned %v, stored %v", at, info.RunAt.UTC(), e.get(info.ID).RunAt.UTC())
		}
		jobs = append(jobs, keel.TaskSpec{Type: "dt.task", Payload: args{N: 2}, Options: []keel.Option{keel.RunAt(at)}},
			keel.TaskSpec{Type: "dt.task", Payload: args{N: 3}, Options: []keel.Option{keel.RunAt(at)}})
	}
	infos, err := c.EnqueueMany(e.ctx, jobs)
	if err != nil {
		t.Fatalf("enqueue many: %v", err)
	}
	for i, info := range infos {
		want := enqueueRunAts[i/2]
		if got := e.get(info.ID).RunAt; !info.RunAt.Equal(want) || !got.Equal(want) {
			t.Errorf("EnqueueMany %d: RunAt(%v) returned %v, stored %v", i, want, info.RunAt.UTC(), got.UTC())
		}
	}

	before := e.total()
	for _, at := range []time.Time{
		firstRunAt.Add(-time.Microsecond), lastRunAt.Add(time.Microsecond), driver.HeldUntil,
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		_, err := c.Enqueue(e.ctx, "dt.task", args{N: 4}, keel.RunAt(at))
		if !errors.Is(err, keel.ErrInvalid) || !strings.Contains(err.Error(), "run_at") {
			t.Errorf("RunAt(%v): %v, want ErrInvalid naming run_at", at, err)
		}
	}
	// A Delay that lands beyond the range is refused the same way.
	late := e.newClient(keel.Config{Types: []string{"dt.task"}, Now: func() time.Time { return lastRunAt.Add(-time.Hour) }})
	if _, err := late.Enqueue(e.ctx, "dt.task", args{N: 5}, keel.Delay(2*time.Hour)); !errors.Is(err, keel.ErrInvalid) || !strings.Contains(err.Error(), "run_at") {
		t.Errorf("Delay past the range: %v, want ErrInvalid naming run_at", err)
	}
	if n := e.total(); n != before {
		t.Fatalf("%d tasks after refused enqueues, want %d", n, before)
	}
}
