package drivertest

import (
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// Durable steps: SaveStep stores a step's JSON result with a running task,
// fenced like a transition; Get, List and the archive return the steps in
// time order; Retry keeps them; bad params write nothing.

// saveStep saves a step and returns whether it applied.
func (e *env) saveStep(p driver.StepParams) bool {
	e.t.Helper()
	ok, err := e.drv.SaveStep(e.ctx, p)
	if err != nil {
		e.t.Fatalf("save step %q: %v", p.Name, err)
	}
	return ok
}

// requireSteps fails unless r's steps are want (name, JSON result,
// attempt, time), in order.
func requireSteps(t *testing.T, what string, r *driver.TaskRow, want ...driver.StepRow) {
	t.Helper()
	if len(r.Steps) != len(want) {
		t.Fatalf("%s: task %d has %d steps %+v, want %d", what, r.ID, len(r.Steps), r.Steps, len(want))
	}
	for i, w := range want {
		g := r.Steps[i]
		if g.Name != w.Name || !jsonEqual(g.Result, w.Result) || g.Attempt != w.Attempt || !g.At.Equal(w.At) {
			t.Fatalf("%s: task %d step %d = {%q %s attempt %d at %v}, want {%q %s attempt %d at %v}", what, r.ID, i,
				g.Name, g.Result, g.Attempt, g.At, w.Name, w.Result, w.Attempt, w.At)
		}
	}
}

func testSteps(t *testing.T, e *env) {
	row := e.insert()
	if got := e.get(row.ID); got.Steps != nil {
		t.Fatalf("a new task has steps %+v", got.Steps)
	}
	t0 := e.clock.Now()
	c := e.claimOne("w", t0)
	// Names a JSON path would misread are stored as they are.
	odd := "a.b[0] $c 'd' é *x** "
	t1 := e.clock.Advance(time.Second)
	for _, p := range []driver.StepParams{
		{ID: row.ID, Fence: c.Fence, Owner: "w", Name: "fetch", Result: []byte(`{"rows": [1, 2, 3], "next": null}`), Now: t1},
		{ID: row.ID, Fence: c.Fence, Owner: "w", Name: odd, Result: []byte(`"x"`), Now: t1.Add(time.Millisecond)},
	} {
		if !e.saveStep(p) {
			t.Fatalf("step %q of a task running under its owner and fence: not applied", p.Name)
		}
	}
	// Overwrite: the same name again replaces the result and its time.
	t2 := e.clock.Advance(time.Second)
	if !e.saveStep(driver.StepParams{ID: row.ID, Fence: c.Fence, Owner: "w", Name: "total", Result: []byte(`0`), Now: t2}) {
		t.Fatal("step total: not applied")
	}
	t3 := e.clock.Advance(time.Second)
	if !e.saveStep(driver.StepParams{ID: row.ID, Fence: c.Fence, Owner: "w", Name: "total", Result: []byte(`42`), Now: t3}) {
		t.Fatal("step total again: not applied")
	}
	// An empty owner fences by the fence alone (an HTTP target's post).
	t4 := e.clock.Advance(time.Second)
	if !e.saveStep(driver.StepParams{ID: row.ID, Fence: c.Fence, Name: "null", Result: []byte(`null`), Now: t4}) {
		t.Fatal("step with the fence and no owner: not applied")
	}
	want := []driver.StepRow{
		{Name: "fetch", Result: []byte(`{"next":null,"rows":[1,2,3]}`), Attempt: 1, At: t1},
		{Name: odd, Result: []byte(`"x"`), Attempt: 1, At: t1.Add(time.Millisecond)},
		{Name: "total", Result: []byte(`42`), Attempt: 1, At: t3},
		{Name: "null", Result: []byte(`null`), Attempt: 1, At: t4},
	}
	requireSteps(t, "get", e.get(row.ID), want...)
	list := e.all()
	if len(list) != 1 {
		t.Fatalf("list: %d tasks", len(list))
	}
	requireSteps(t, "list", &list[0], want...)
	// The task finishes: its steps stay.
	t5 := e.clock.Advance(time.Second)
	if n := e.finish("w", t5, driver.Transition{ID: row.ID, Fence: c.Fence, State: driver.StateSucceeded, Task: &c}); len(n) != 1 {
		t.Fatal("finish: not applied")
	}
	requireSteps(t, "succeeded", e.get(row.ID), want...)
}

func testStepsFenced(t *testing.T, e *env) {
	row := e.insert()
	t0 := e.clock.Now()
	// Pending: no step applies.
	if e.saveStep(driver.StepParams{ID: row.ID, Fence: 1, Name: "s", Result: []byte(`1`), Now: t0}) {
		t.Fatal("a step of a pending task applied")
	}
	c := e.claimOne("A", t0)
	t1 := e.clock.Advance(time.Second)
	if !e.saveStep(driver.StepParams{ID: row.ID, Fence: c.Fence, Owner: "A", Name: "one", Result: []byte(`1`), Now: t1}) {
		t.Fatal("step one: not applied")
	}
	before := e.get(row.ID)
	for name, p := range map[string]driver.StepParams{
		"wrong fence":           {ID: row.ID, Fence: c.Fence + 1, Owner: "A", Name: "two", Result: []byte(`2`), Now: t1},
		"other fence, no owner": {ID: row.ID, Fence: c.Fence + 100, Name: "two", Result: []byte(`2`), Now: t1},
		"wrong owner":           {ID: row.ID, Fence: c.Fence, Owner: "B", Name: "two", Result: []byte(`2`), Now: t1},
		"unknown task":          {ID: row.ID + 1000, Fence: 1, Name: "two", Result: []byte(`2`), Now: t1},
		"overwrite, fenced":     {ID: row.ID, Fence: c.Fence + 1, Owner: "A", Name: "one", Result: []byte(`9`), Now: t1},
	} {
		if e.saveStep(p) {
			t.Fatalf("%s: applied", name)
		}
	}
	if after := e.get(row.ID); !sameRow(after, before) {
		t.Fatalf("rejected steps changed the task\n got %+v\nwant %+v", after, before)
	}
	// Lease lost to a rescue: the old fence no longer writes; the new
	// claim (next attempt) does, and sees the first attempt's step.
	if _, err := e.rescue(t1.Add(leaseTTL+time.Second), 10, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t2 := e.clock.Advance(leaseTTL + 2*time.Second)
	if e.saveStep(driver.StepParams{ID: row.ID, Fence: c.Fence, Owner: "A", Name: "two", Result: []byte(`2`), Now: t2}) {
		t.Fatal("a step with the fence of a rescued claim applied")
	}
	c2 := e.claimOne("B", t2)
	if c2.Fence != c.Fence+1 || c2.Attempt != 2 {
		t.Fatalf("claim after rescue: fence %d attempt %d", c2.Fence, c2.Attempt)
	}
	if !e.saveStep(driver.StepParams{ID: row.ID, Fence: c2.Fence, Owner: "B", Name: "two", Result: []byte(`2`), Now: t2}) {
		t.Fatal("step two of the new claim: not applied")
	}
	requireSteps(t, "after rescue", e.get(row.ID),
		driver.StepRow{Name: "one", Result: []byte(`1`), Attempt: 1, At: t1},
		driver.StepRow{Name: "two", Result: []byte(`2`), Attempt: 2, At: t2})
	// Cancelled: no step applies.
	if _, err := e.drv.Cancel(e.ctx, row.ID, t2); err != nil {
		t.Fatal(err)
	}
	if e.saveStep(driver.StepParams{ID: row.ID, Fence: c2.Fence, Owner: "B", Name: "three", Result: []byte(`3`), Now: t2}) {
		t.Fatal("a step of a cancelled task applied")
	}
	if got := e.get(row.ID); len(got.Steps) != 2 {
		t.Fatalf("cancelled task has %d steps, want 2", len(got.Steps))
	}
}

func testStepsBadParams(t *testing.T, e *env) {
	row := e.insert()
	t0 := e.clock.Now()
	c := e.claimOne("w", t0)
	ok := driver.StepParams{ID: row.ID, Fence: c.Fence, Owner: "w", Name: "s", Result: []byte(`1`), Now: t0}
	before := e.get(row.ID)
	for name, mod := range map[string]func(p *driver.StepParams){
		"no id":          func(p *driver.StepParams) { p.ID = 0 },
		"no fence":       func(p *driver.StepParams) { p.Fence = 0 },
		"no time":        func(p *driver.StepParams) { p.Now = time.Time{} },
		"empty name":     func(p *driver.StepParams) { p.Name = "" },
		"long name":      func(p *driver.StepParams) { p.Name = strings.Repeat("n", driver.MaxStepName+1) },
		"quote in name":  func(p *driver.StepParams) { p.Name = `a"b` },
		"backslash":      func(p *driver.StepParams) { p.Name = `a\b` },
		"control char":   func(p *driver.StepParams) { p.Name = "a\nb" },
		"bad utf-8":      func(p *driver.StepParams) { p.Name = "a\xffb" },
		"no result":      func(p *driver.StepParams) { p.Result = nil },
		"invalid JSON":   func(p *driver.StepParams) { p.Result = []byte(`{"a":`) },
		"result too big": func(p *driver.StepParams) { p.Result = []byte(`"` + strings.Repeat("x", driver.MaxStepsBytes) + `"`) },
	} {
		p := ok
		mod(&p)
		applied, err := e.drv.SaveStep(e.ctx, p)
		if err == nil || applied {
			t.Fatalf("%s: applied %v, err %v; want an error", name, applied, err)
		}
	}
	if after := e.get(row.ID); !sameRow(after, before) || after.Steps != nil {
		t.Fatalf("refused steps changed the task\n got %+v\nwant %+v", after, before)
	}
	if !e.saveStep(ok) {
		t.Fatal("the good params: not applied")
	}
	long := ok
	long.Name = strings.Repeat("é", driver.MaxStepName/2)
	if !e.saveStep(long) {
		t.Fatal("a name of exactly the limit: not applied")
	}
	if got := e.get(row.ID); len(got.Steps) != 2 {
		t.Fatalf("got %d steps, want 2", len(got.Steps))
	}
}

func testStepsKeptByRetryAndArchive(t *testing.T, e *env) {
	row := e.insert()
	t0 := e.clock.Now()
	c := e.claimOne("w", t0)
	if !e.saveStep(driver.StepParams{ID: row.ID, Fence: c.Fence, Owner: "w", Name: "one", Result: []byte(`{"id": 7}`), Now: t0}) {
		t.Fatal("step one: not applied")
	}
	one := driver.StepRow{Name: "one", Result: []byte(`{"id":7}`), Attempt: 1, At: t0}
	ae := attemptError(1, "w", t0, t0, "permanent")
	if n := e.finish("w", t0, driver.Transition{ID: row.ID, Fence: c.Fence, State: driver.StateDead, Error: ae, Task: &c}); len(n) != 1 {
		t.Fatal("dead: not applied")
	}
	requireSteps(t, "dead", e.get(row.ID), one)
	// A manual requeue keeps the steps: the work they did stays done.
	t1 := e.clock.Advance(time.Second)
	r, err := e.drv.Retry(e.ctx, row.ID, t1)
	if err != nil {
		t.Fatal(err)
	}
	requireSteps(t, "retry's row", r, one)
	requireSteps(t, "retried", e.get(row.ID), one)
	c2 := e.claimOne("w", t1)
	if !e.saveStep(driver.StepParams{ID: row.ID, Fence: c2.Fence, Owner: "w", Name: "two", Result: []byte(`[true]`), Now: t1}) {
		t.Fatal("step two: not applied")
	}
	two := driver.StepRow{Name: "two", Result: []byte(`[true]`), Attempt: 1, At: t1}
	if n := e.finish("w", t1, driver.Transition{ID: row.ID, Fence: c2.Fence, State: driver.StateSucceeded, Task: &c2}); len(n) != 1 {
		t.Fatal("succeed: not applied")
	}
	// RetryMatching keeps them too.
	other := e.insert(func(p *driver.InsertParams) { p.Payload = []byte(`{"n":2}`) })
	c3 := e.claimOne("w", t1)
	if c3.ID != other.ID {
		t.Fatalf("claimed %d, want %d", c3.ID, other.ID)
	}
	e.saveStep(driver.StepParams{ID: other.ID, Fence: c3.Fence, Owner: "w", Name: "x", Result: []byte(`1`), Now: t1})
	e.finish("w", t1, driver.Transition{ID: other.ID, Fence: c3.Fence, State: driver.StateDead, Error: ae, Task: &c3})
	if n, err := e.drv.RetryMatching(e.ctx, driver.Filter{State: driver.StateDead, Limit: 10}, t1); err != nil || n != 1 {
		t.Fatalf("retry matching: %d, %v", n, err)
	}
	requireSteps(t, "retried by RetryMatching", e.get(other.ID), driver.StepRow{Name: "x", Result: []byte(`1`), Attempt: 1, At: t1})
	// Archived: the steps move with the task.
	t2 := e.clock.Advance(time.Hour)
	res, err := e.drv.Archive(e.ctx, driver.ArchiveParams{SucceededBefore: t2, DeadBefore: t2, Limit: 10, Now: t2})
	if err != nil || res.Succeeded != 1 {
		t.Fatalf("archive: %+v, %v", res, err)
	}
	got := e.get(row.ID)
	if got.ArchivedAt.IsZero() {
		t.Fatal("task not archived")
	}
	requireSteps(t, "archived", got, one, two)
}
