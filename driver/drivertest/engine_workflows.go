package drivertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/workflow"
)

// stepArgs is the payload of the workflow tests' tasks.
type stepArgs struct {
	Name string `json:"name"`
	Fail bool   `json:"fail"`
}

// stepLog records, in one sequence, when each named task's handler
// started and returned.
type stepLog struct {
	mu         sync.Mutex
	seq        int
	start, end map[string]int
	runs       map[string]int
}

func (l *stepLog) mark(name string, start bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	if start {
		l.start[name] = l.seq
		l.runs[name]++
	} else {
		l.end[name] = l.seq
	}
}

func (l *stepLog) get(name string) (start, end, runs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start[name], l.end[name], l.runs[name]
}

// stepClient is a started worker for "wf.step" (dead at once when asked to
// fail); "wf.other" is declared, not handled, so its tasks stay pending.
func (e *env) stepClient() (*keel.Client, *stepLog) {
	l := &stepLog{start: map[string]int{}, end: map[string]int{}, runs: map[string]int{}}
	h := keel.NewHandlers()
	keel.Handle(h, "wf.step", func(ctx context.Context, task *keel.Task[stepArgs]) error {
		l.mark(task.Args.Name, true)
		defer l.mark(task.Args.Name, false)
		if task.Args.Fail {
			return keel.Permanent(errors.New("failed on purpose"))
		}
		return nil
	})
	c := e.newClient(keel.Config{Handlers: h, Types: []string{"wf.other"}})
	return c, l
}

func step(name string, fail bool, needs ...string) workflow.Task {
	return workflow.Task{Name: name, Needs: needs, TaskSpec: keel.TaskSpec{Type: "wf.step", Payload: stepArgs{Name: name, Fail: fail}}}
}

// byName maps a workflow's task names to their ids.
func byName(w *workflow.Info) map[string]int64 {
	out := map[string]int64{}
	for _, n := range w.Tasks {
		out[n.Name] = n.TaskID
	}
	return out
}

// testEngineWorkflowDiamond: A, then B and C, then D: D runs once, after
// both B and C succeeded, and the workflow reads succeeded.
func testEngineWorkflowDiamond(t *testing.T, e *env) {
	c, l := e.stepClient()
	w, tasks, err := workflow.Enqueue(e.ctx, c, workflow.Spec{Name: "diamond", Tasks: []workflow.Task{
		step("D", false, "B", "C"), step("B", false, "A"), step("C", false, "A"), step("A", false)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 4 || tasks[0].Type != "wf.step" || !tasks[0].Held || !tasks[1].Held || tasks[3].Held {
		t.Fatalf("enqueued %+v", tasks)
	}
	if w.Tasks[0].Name != "A" || w.Tasks[3].Name != "D" {
		t.Fatalf("tasks not in insertion order: %+v", w.Tasks)
	}
	e.checkCounters("enqueued")
	ids := byName(w)
	e.startClient(c)
	e.waitState(ids["D"], driver.StateSucceeded)
	time.Sleep(1500 * time.Millisecond) // another pass of the releaser: nothing more runs
	for _, n := range []string{"A", "B", "C", "D"} {
		if _, _, runs := l.get(n); runs != 1 {
			t.Fatalf("%s ran %d times", n, runs)
		}
	}
	sa, ea, _ := l.get("A")
	sb, eb, _ := l.get("B")
	sc, ec, _ := l.get("C")
	sd, _, _ := l.get("D")
	if sb < ea || sc < ea || sd < eb || sd < ec || sa == 0 {
		t.Fatalf("order: A %d-%d, B %d-%d, C %d-%d, D started %d", sa, ea, sb, eb, sc, ec, sd)
	}
	d := e.get(ids["D"])
	b := e.get(ids["B"])
	if d.StartedAt.Before(b.FinishedAt) {
		t.Fatalf("D started %v before B finished %v", d.StartedAt, b.FinishedAt)
	}
	got, err := workflow.Get(e.ctx, c, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != workflow.Succeeded || len(got.Tasks) != 4 || got.Name != "diamond" || got.OnFailure != workflow.Cancel {
		t.Fatalf("workflow %+v", got)
	}
	if n := got.Tasks[3]; n.Name != "D" || fmt.Sprint(n.Needs) != "[B C]" || n.State != keel.StateSucceeded || n.Held {
		t.Fatalf("node D %+v", n)
	}
	if of, err := workflow.Of(e.ctx, c, ids["B"]); err != nil || of.ID != w.ID {
		t.Fatalf("workflow of B: %+v, %v", of, err)
	}
	if list, err := workflow.List(e.ctx, c, workflow.Filter{}); err != nil || len(list) != 1 || list[0].ID != w.ID {
		t.Fatalf("list: %+v, %v", list, err)
	}
	e.checkCounters("done")
}

// testEngineWorkflowDeadCascades: a dead B cancels D, which needs it, with
// the reason in D's errors, and E, which needs D; neither runs.
func testEngineWorkflowDeadCascades(t *testing.T, e *env) {
	c, l := e.stepClient()
	w, _, err := workflow.Enqueue(e.ctx, c, workflow.Spec{Name: "dead", Tasks: []workflow.Task{
		step("A", false), step("B", true, "A"), step("C", false, "A"), step("D", false, "B", "C"), step("E", false, "D")}})
	if err != nil {
		t.Fatal(err)
	}
	ids := byName(w)
	e.startClient(c)
	e.waitState(ids["B"], driver.StateDead)
	d := e.waitState(ids["D"], driver.StateCancelled)
	ee := e.waitState(ids["E"], driver.StateCancelled)
	want := fmt.Sprintf("dependency %d (B) is dead", ids["B"])
	if len(d.Errors) != 1 || d.Errors[0].Error != want || d.Errors[0].Outcome != driver.OutcomeCancelled || d.Attempt != 0 {
		t.Fatalf("D: attempt %d, errors %+v, want one %q", d.Attempt, d.Errors, want)
	}
	want = fmt.Sprintf("dependency %d (D) is cancelled", ids["D"])
	if len(ee.Errors) != 1 || ee.Errors[0].Error != want {
		t.Fatalf("E: errors %+v, want %q", ee.Errors, want)
	}
	info, err := c.Get(e.ctx, ids["D"])
	if err != nil || info.State != keel.StateCancelled || info.Held || info.Errors[0].Error == "" {
		t.Fatalf("D as TaskInfo: %+v, %v", info, err)
	}
	e.waitState(ids["C"], driver.StateSucceeded)
	if _, _, runs := l.get("D"); runs != 0 {
		t.Fatalf("D ran %d times", runs)
	}
	got, err := workflow.Get(e.ctx, c, w.ID)
	if err != nil || got.State != workflow.Failed {
		t.Fatalf("workflow %+v, %v", got, err)
	}
	e.checkCounters("cancelled")
}

// testEngineWorkflowContinue: under on_failure continue, D runs once B
// died and C succeeded.
func testEngineWorkflowContinue(t *testing.T, e *env) {
	c, l := e.stepClient()
	w, _, err := workflow.Enqueue(e.ctx, c, workflow.Spec{Name: "continue", OnFailure: workflow.Continue, Tasks: []workflow.Task{
		step("B", true), step("C", false), step("D", false, "B", "C")}})
	if err != nil {
		t.Fatal(err)
	}
	ids := byName(w)
	e.startClient(c)
	e.waitState(ids["D"], driver.StateSucceeded)
	sd, _, runs := l.get("D")
	_, eb, _ := l.get("B")
	_, ec, _ := l.get("C")
	if runs != 1 || sd < eb || sd < ec {
		t.Fatalf("D ran %d times, started %d, B ended %d, C ended %d", runs, sd, eb, ec)
	}
	if got, err := workflow.Get(e.ctx, c, w.ID); err != nil || got.State != workflow.Failed || got.OnFailure != workflow.Continue {
		t.Fatalf("workflow %+v, %v", got, err)
	}
	e.checkCounters("continued")
}

// testEngineWorkflowBadInput: a cycle, an unknown or duplicate name, a
// self-dependency, an unknown or archived dependency are refused with
// ErrInvalid and write nothing.
func testEngineWorkflowBadInput(t *testing.T, e *env) {
	c, _ := e.stepClient()
	old := e.finishedTask(driver.StateSucceeded, e.clock.Now())
	if res, err := e.drv.Archive(e.ctx, driver.ArchiveParams{SucceededBefore: e.clock.Now().Add(time.Hour),
		DeadBefore: e.clock.Now().Add(time.Hour), Limit: 10, Now: e.clock.Now()}); err != nil || res.Succeeded != 1 {
		t.Fatalf("archive: %+v, %v", res, err)
	}
	live, err := c.Enqueue(e.ctx, "wf.step", stepArgs{Name: "live"})
	if err != nil {
		t.Fatal(err)
	}
	before := e.countAll()
	for name, s := range map[string]workflow.Spec{
		"cycle":          {Name: "w", Tasks: []workflow.Task{step("A", false, "C"), step("B", false, "A"), step("C", false, "B")}},
		"unknown name":   {Name: "w", Tasks: []workflow.Task{step("A", false), step("B", false, "Z")}},
		"duplicate name": {Name: "w", Tasks: []workflow.Task{step("A", false), step("A", false)}},
		"self":           {Name: "w", Tasks: []workflow.Task{step("A", false, "A")}},
		"no name":        {Tasks: []workflow.Task{step("A", false)}},
		"bad policy":     {Name: "w", OnFailure: "ignore", Tasks: []workflow.Task{step("A", false)}},
		"no tasks":       {Name: "w"},
		"bad task":       {Name: "w", Tasks: []workflow.Task{step("A", false), {Name: "B", TaskSpec: keel.TaskSpec{Type: "bad type!"}}}},
		"sequence":       {Name: "w", Tasks: []workflow.Task{{Name: "A", TaskSpec: keel.TaskSpec{Type: "wf.step", Options: []keel.Option{keel.Sequence("k")}}}}},
		"needs and delay": {Name: "w", Tasks: []workflow.Task{step("A", false),
			{Name: "B", Needs: []string{"A"}, TaskSpec: keel.TaskSpec{Type: "wf.step", Options: []keel.Option{keel.Delay(time.Minute)}}}}},
	} {
		if _, _, err := workflow.Enqueue(e.ctx, c, s); !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	for name, opts := range map[string][]keel.Option{
		"unknown id":    {keel.DependsOn(live.ID + 1000)},
		"archived id":   {keel.DependsOn(old.ID)},
		"one unknown":   {keel.DependsOn(live.ID, live.ID+1000)},
		"zero":          {keel.DependsOn(0)},
		"with a delay":  {keel.DependsOn(live.ID), keel.Delay(time.Minute)},
		"in a sequence": {keel.DependsOn(live.ID), keel.Sequence("k")},
	} {
		_, err := c.Enqueue(e.ctx, "wf.step", stepArgs{Name: "x"}, opts...)
		if !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("DependsOn %s: %v, want ErrInvalid", name, err)
		}
		if name == "archived id" && err != nil && !strings.Contains(err.Error(), fmt.Sprint(old.ID)) {
			t.Errorf("archived dependency: %v does not name task %d", err, old.ID)
		}
	}
	if _, err := c.EnqueueMany(e.ctx, []keel.TaskSpec{{Type: "wf.step"},
		{Type: "wf.step", Options: []keel.Option{keel.DependsOn(live.ID + 1000)}}}); !errors.Is(err, keel.ErrInvalid) {
		t.Errorf("EnqueueMany with an unknown dependency: %v", err)
	}
	if after := e.countAll(); after != before {
		t.Fatalf("refused input wrote tasks: %d before, %d after", before, after)
	}
	if ws, err := workflow.List(e.ctx, c, workflow.Filter{}); err != nil || len(ws) != 0 {
		t.Fatalf("refused workflows stored %d workflows, %v", len(ws), err)
	}
	if _, err := workflow.Get(e.ctx, c, 12345); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("unknown workflow: %v", err)
	}
	if w, ok := e.drv.(driver.Workflows); ok {
		if waits, err := w.Waits(e.ctx, 0, 10); err != nil || len(waits) != 0 {
			t.Fatalf("refused input left waits %+v, %v", waits, err)
		}
	}
	e.checkCounters("refused")
}

// testEngineWorkflowHeld: a held task is never claimed while its
// dependency is pending; a user cancelling it cascades to the task that
// depends on it; a dependency written in the caller's transaction exists
// only if it commits.
func testEngineWorkflowHeld(t *testing.T, e *env) {
	c, l := e.stepClient()
	a, err := c.Enqueue(e.ctx, "wf.other", nil) // nobody runs it
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Enqueue(e.ctx, "wf.step", stepArgs{Name: "D"}, keel.DependsOn(a.ID))
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.Enqueue(e.ctx, "wf.step", stepArgs{Name: "F"}, keel.DependsOn(d.ID, a.ID, d.ID))
	if err != nil {
		t.Fatal(err)
	}
	if !d.Held || d.State != keel.StatePending || !f.Held {
		t.Fatalf("dependents not held: %+v %+v", d, f)
	}
	e.checkCounters("held")
	e.startClient(c)
	time.Sleep(1500 * time.Millisecond) // the releaser ran: D stays held
	if r := e.get(d.ID); r.State != driver.StatePending || !driver.Held(r.RunAt) || r.Attempt != 0 {
		t.Fatalf("held D was touched: %+v", r)
	}
	later := e.clock.Now().Add(24 * time.Hour)
	if rows, err := e.drv.Claim(e.ctx, driver.ClaimParams{Queue: "default", Limit: 10, Owner: "thief", Now: later,
		LeaseExpiresAt: later.Add(time.Hour), Types: []string{"wf.step"}}); err != nil || len(rows) != 0 {
		t.Fatalf("a claim took held tasks: %+v", rows)
	}
	if _, err := c.Cancel(e.ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	r := e.waitState(f.ID, driver.StateCancelled)
	if want := fmt.Sprintf("dependency %d is cancelled", d.ID); len(r.Errors) != 1 || r.Errors[0].Error != want {
		t.Fatalf("F errors %+v, want %q", r.Errors, want)
	}
	if _, _, runs := l.get("D"); runs != 0 {
		t.Fatalf("D ran %d times", runs)
	}
	if w, ok := e.drv.(driver.Workflows); ok {
		waitFor(t, "the waits to go", func() bool {
			waits, err := w.Waits(e.ctx, 0, 10)
			return err == nil && len(waits) == 0
		})
	}
	e.checkCounters("cascaded")

	// Released once the dependency succeeds, in the caller's transaction.
	dber, ok := e.drv.(driver.DBer)
	if !ok {
		return
	}
	b, err := c.Enqueue(e.ctx, "wf.step", stepArgs{Name: "B"})
	if err != nil {
		t.Fatal(err)
	}
	for _, commit := range []bool{false, true} {
		tx, err := dber.DB().BeginTx(e.ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.EnqueueTx(e.ctx, tx, "wf.step", stepArgs{Name: "G"}, keel.DependsOn(b.ID))
		if err != nil {
			tx.Rollback() //nolint:errcheck // failing anyway
			t.Fatal(err)
		}
		if !commit {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Get(e.ctx, g.ID); !errors.Is(err, keel.ErrNotFound) {
				t.Fatalf("rolled back dependent: %v", err)
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		e.waitState(g.ID, driver.StateSucceeded)
	}
	if _, _, runs := l.get("G"); runs != 1 {
		t.Fatalf("G ran %d times", runs)
	}
	e.checkCounters("released")
}

// rowsOf counts the rows of keel table table whose column col is id, or
// -1 when the driver has no database/sql handle.
func (e *env) rowsOf(table, col string, id int64) int64 {
	e.t.Helper()
	dber, ok := e.drv.(driver.DBer)
	if !ok {
		return -1
	}
	if s, ok := e.drv.(interface{ Schema() string }); ok {
		table = s.Schema() + "." + table
	}
	var n int64
	if err := dber.DB().QueryRowContext(e.ctx, fmt.Sprintf(`SELECT count(*) FROM %s WHERE %s = %d`, table, col, id)).Scan(&n); err != nil {
		e.t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// testEngineWorkflowPrune: the dependency rows of a task outside a
// workflow go with its wait; a workflow, with its task and dependency
// rows, is deleted once none of its tasks is stored, in keel_tasks or the
// archive, and not before it is PruneAge old; the pages go on from the
// last id.
func testEngineWorkflowPrune(t *testing.T, e *env) {
	store, ok := e.drv.(driver.Workflows)
	if !ok {
		t.Skip("driver does not implement driver.Workflows")
	}
	c, _ := e.stepClient()
	spec := func(name string) workflow.Spec {
		return workflow.Spec{Name: name, Tasks: []workflow.Task{step("A", false), step("B", false, "A")}}
	}
	w1, _, err := workflow.Enqueue(e.ctx, c, spec("one"))
	if err != nil {
		t.Fatal(err)
	}
	w2, _, err := workflow.Enqueue(e.ctx, c, spec("two"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := c.Enqueue(e.ctx, "wf.step", stepArgs{Name: "X"})
	if err != nil {
		t.Fatal(err)
	}
	y, err := c.Enqueue(e.ctx, "wf.step", stepArgs{Name: "Y"}, keel.DependsOn(x.ID))
	if err != nil {
		t.Fatal(err)
	}
	b1 := byName(w1)["B"]
	if n := e.rowsOf("keel_deps", "task_id", y.ID); n == 0 {
		t.Fatal("Y's dependency row was not written")
	}
	e.startClient(c)
	for _, id := range []int64{b1, byName(w2)["B"], y.ID} {
		e.waitState(id, driver.StateSucceeded)
	}
	waitFor(t, "the waits to go", func() bool {
		waits, err := store.Waits(e.ctx, 0, 10)
		return err == nil && len(waits) == 0
	})
	if n := e.rowsOf("keel_deps", "task_id", y.ID); n > 0 {
		t.Fatalf("Y's wait is settled, %d dependency rows left", n)
	}
	if n := e.rowsOf("keel_deps", "task_id", b1); n == 0 {
		t.Fatal("the dependency row of a workflow's task went with its wait; its graph needs it")
	}

	later := e.clock.Now().Add(48 * time.Hour) // every workflow is old enough
	prune := func(after int64, limit int) (int64, int64) {
		t.Helper()
		last, n, err := store.PruneWorkflows(e.ctx, driver.PruneWorkflowsParams{After: after, Before: later, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return last, n
	}
	if last, n := prune(0, 10); n != 0 || last != w2.ID {
		t.Fatalf("tasks stored: pruned %d, last %d (want 0, %d)", n, last, w2.ID)
	}
	// Archived: still stored.
	e.archiveAll(driver.ArchiveParams{SucceededBefore: later, DeadBefore: later, Limit: 100, Now: later})
	if last, n := prune(0, 10); n != 0 || last != w2.ID {
		t.Fatalf("tasks archived: pruned %d, last %d (want 0, %d)", n, last, w2.ID)
	}
	// Gone from the archive too: deleted, one page at a time.
	if _, err := e.drv.PurgeArchive(e.ctx, later.Add(time.Hour), 1000); err != nil {
		t.Fatal(err)
	}
	young, _, err := store.PruneWorkflows(e.ctx, driver.PruneWorkflowsParams{Before: w1.CreatedAt.Add(-time.Second), Limit: 10})
	if err != nil || young != w2.ID {
		t.Fatalf("too young: last %d, %v", young, err)
	}
	if _, err := workflow.Get(e.ctx, c, w1.ID); err != nil {
		t.Fatalf("a workflow younger than Before was deleted: %v", err)
	}
	if last, n := prune(0, 1); n != 1 || last != w1.ID {
		t.Fatalf("first page: pruned %d, last %d (want 1, %d)", n, last, w1.ID)
	}
	if _, err := workflow.Get(e.ctx, c, w1.ID); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("pruned workflow: %v, want ErrNotFound", err)
	}
	if _, err := workflow.Get(e.ctx, c, w2.ID); err != nil {
		t.Fatalf("the second workflow went with the first page: %v", err)
	}
	if last, n := prune(w1.ID, 1); n != 1 || last != w2.ID {
		t.Fatalf("second page: pruned %d, last %d (want 1, %d)", n, last, w2.ID)
	}
	if last, n := prune(w2.ID, 1); n != 0 || last != 0 {
		t.Fatalf("past the end: pruned %d, last %d", n, last)
	}
	if list, err := workflow.List(e.ctx, c, workflow.Filter{}); err != nil || len(list) != 0 {
		t.Fatalf("list after pruning: %+v, %v", list, err)
	}
	for _, w := range []*workflow.Info{w1, w2} {
		if n := e.rowsOf("keel_workflow_tasks", "workflow_id", w.ID); n > 0 {
			t.Fatalf("workflow %d: %d task rows left", w.ID, n)
		}
		if n := e.rowsOf("keel_deps", "task_id", byName(w)["B"]); n > 0 {
			t.Fatalf("workflow %d: %d dependency rows left", w.ID, n)
		}
	}
}
