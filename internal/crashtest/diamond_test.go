package crashtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/workflow"
)

// The workflow scenario: diamonds (A, then B and C, then D) worked by
// worker processes, one of which is SIGKILLed again and again: every D
// runs once, after its B and C succeeded; a diamond whose B dies has its
// D cancelled, never run.

// diamondFailType always fails: the B of a failing diamond.
const diamondFailType = "crash.diamond.fail"

// newDiamondWorker is newWorker (taskType records its effect with
// CompleteTx) that also runs diamondFailType, which always fails.
func newDiamondWorker(b *backend, drv driver.Driver, db *sql.DB, node string, delay time.Duration) (*keel.Client, error) {
	cfg := workerConfig(b, drv, db, node, delay)
	keel.Handle(cfg.Handlers, diamondFailType, func(ctx context.Context, task *keel.Task[job]) error {
		return errors.New("B fails on purpose")
	}, keel.NoBrake())
	return keel.NewClient(cfg)
}

// diamondUnderKills: 200 diamonds (100 on SQLite) and 5 failing ones (B
// of diamondFailType, at most 2 attempts) are enqueued as workflows and
// worked by three worker processes; one, not the leader, is SIGKILLed
// three times while it runs tasks, and restarted. Every task of the good
// diamonds succeeds with its effect applied exactly once (by its final
// attempt); every D started after its B and C finished; a failing
// diamond's B is dead and its D cancelled without an attempt, with the
// reason in its errors; no wait row is left and the counters are exact.
func diamondUnderKills(t *testing.T, b *backend) {
	e := setup(t, b)
	good, bad := 200, 5
	if b.name == "sqlite" {
		good = 100
	}
	const kills = 3
	const delay = 50 * time.Millisecond
	c, err := keel.NewClient(keel.Config{Driver: e.drv, Types: []string{taskType, diamondFailType}})
	if err != nil {
		t.Fatal(err)
	}
	step := func(name, typ string, n int, needs ...string) workflow.Task {
		var opts []keel.Option
		if typ == diamondFailType {
			opts = append(opts, keel.MaxAttempts(1+n%2))
		}
		return workflow.Task{Name: name, Needs: needs, TaskSpec: keel.TaskSpec{Type: typ, Payload: job{N: n}, Options: opts}}
	}
	type diamond struct {
		a, b, c, d int64
		fails      bool
	}
	var ds []diamond
	began := time.Now()
	for i := range good + bad {
		bType := taskType
		if i >= good {
			bType = diamondFailType
		}
		w, _, err := workflow.Enqueue(e.ctx, c, workflow.Spec{Name: fmt.Sprintf("diamond %d", i), Tasks: []workflow.Task{
			step("A", taskType, 4*i), step("B", bType, 4*i+1, "A"), step("C", taskType, 4*i+2, "A"), step("D", taskType, 4*i+3, "B", "C")}})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]int64{}
		for _, n := range w.Tasks {
			ids[n.Name] = n.TaskID
		}
		ds = append(ds, diamond{a: ids["A"], b: ids["B"], c: ids["C"], d: ids["D"], fails: i >= good})
	}
	total := int64(4*good + 2*bad) // the tasks that succeed
	t.Logf("%d diamonds (%d failing) enqueued in %v", good+bad, bad, time.Since(began).Round(time.Millisecond))

	workers := map[string]*worker{}
	start := func(name string) { workers[name] = e.startWorkerMode("diamond", name, delay) }
	for _, n := range []string{"d1", "d2", "d3"} {
		start(n)
	}
	slot := ""
	var victims []string
	for k := 1; len(victims) < kills; k++ {
		if k > kills+4 {
			t.Fatalf("%d of %d kills found the victim running tasks", len(victims), k-1)
		}
		at := total * int64(len(victims)+1) / (kills + 2)
		e.waitFor(fmt.Sprintf("%d tasks to succeed", at), 90*time.Second, func() bool {
			return e.counts()[driver.StateSucceeded] >= at
		})
		var victim *worker
		e.waitFor("a non-leader worker running tasks", 30*time.Second, func() bool {
			leader := e.leader()
			for n, w := range workers {
				if n != leader && (slot == "" || strings.HasPrefix(n, slot)) && len(e.runningOf(n)) >= 1 {
					victim = w
					return true
				}
			}
			return false
		})
		if slot == "" {
			slot = victim.Name
		}
		e.kill(victim)
		time.Sleep(300 * time.Millisecond)
		held := e.runningOf(victim.Name)
		t.Logf("kill %d: killed %s (leader %q) holding %d tasks; %d of %d succeeded after %v",
			k, victim.Name, e.leader(), len(held), e.counts()[driver.StateSucceeded], total, time.Since(began).Round(time.Millisecond))
		if len(held) > 0 {
			victims = append(victims, victim.Name)
		}
		delete(workers, victim.Name)
		start(fmt.Sprintf("%s-r%d", slot, k))
	}

	// Then the leader, whose releaser may be midway through a pass.
	at := total * (kills + 1) / (kills + 2)
	e.waitFor(fmt.Sprintf("%d tasks to succeed", at), 90*time.Second, func() bool {
		return e.counts()[driver.StateSucceeded] >= at
	})
	leader := e.leader()
	if w, ok := workers[leader]; ok {
		e.kill(w)
		delete(workers, leader)
		t.Logf("killed the leader %s; %d of %d succeeded after %v", leader, e.counts()[driver.StateSucceeded], total,
			time.Since(began).Round(time.Millisecond))
		start(leader + "-r")
	}

	e.waitFor("every diamond to settle", 120*time.Second, func() bool {
		c := e.counts()
		return c[driver.StateSucceeded] == total && c[driver.StateDead] == int64(bad) && c[driver.StateCancelled] == int64(bad)
	})
	time.Sleep(2500 * time.Millisecond) // two more passes of the releaser: nothing more runs
	e.checkCounters("at the end")
	if c := e.counts(); c[driver.StateSucceeded] != total || c[driver.StateDead] != int64(bad) || c[driver.StateCancelled] != int64(bad) ||
		c[driver.StatePending]+c[driver.StateRunning] != 0 {
		t.Fatalf("final states %v, want %d succeeded, %d dead, %d cancelled", c, total, bad, bad)
	}

	// Each succeeded task has exactly one effect, from its final attempt;
	// no other task has any.
	var succeeded, effects, badEffects, stray int64
	err = e.db.QueryRowContext(e.ctx, `SELECT
		(SELECT count(*) FROM keel_tasks WHERE state = 'succeeded'),
		(SELECT count(*) FROM effects),
		(SELECT count(*) FROM keel_tasks k
			LEFT JOIN (SELECT task_id, count(*) AS n, max(attempt) AS attempt FROM effects GROUP BY task_id) f ON f.task_id = k.id
			WHERE k.state = 'succeeded' AND (f.n IS NULL OR f.n <> 1 OR f.attempt <> k.attempt)),
		(SELECT count(*) FROM effects f JOIN keel_tasks k ON k.id = f.task_id WHERE k.state <> 'succeeded')`).
		Scan(&succeeded, &effects, &badEffects, &stray)
	if err != nil {
		t.Fatal(err)
	}
	if succeeded != total || effects != total || badEffects != 0 || stray != 0 {
		t.Fatalf("%d succeeded tasks, %d effects, %d tasks without exactly one effect from their final attempt, %d effects of tasks not succeeded",
			succeeded, effects, badEffects, stray)
	}
	var waits int64
	if err := e.db.QueryRowContext(e.ctx, `SELECT count(*) FROM keel_waits`).Scan(&waits); err != nil || waits != 0 {
		t.Fatalf("%d wait rows left (%v)", waits, err)
	}

	// Every D after its B and C; a failing diamond's D cancelled, never
	// run, with the reason.
	get := func(id int64) *driver.TaskRow {
		r, err := e.drv.Get(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var rescuedD int
	for i, d := range ds {
		rb, rc, rd := get(d.b), get(d.c), get(d.d)
		if d.fails {
			want := fmt.Sprintf("dependency %d (B) is dead", d.b)
			if rb.State != driver.StateDead || rd.State != driver.StateCancelled || rd.Attempt != 0 || !rd.StartedAt.IsZero() ||
				len(rd.Errors) != 1 || rd.Errors[0].Error != want {
				t.Fatalf("failing diamond %d: B %s, D %s attempt %d started %v errors %+v; want B dead, D cancelled unrun with %q",
					i, rb.State, rd.State, rd.Attempt, rd.StartedAt, rd.Errors, want)
			}
			continue
		}
		if rd.StartedAt.Before(rb.FinishedAt) || rd.StartedAt.Before(rc.FinishedAt) {
			t.Fatalf("diamond %d: D started %v, before B (%v) or C (%v) finished", i,
				rd.StartedAt.Format(time.RFC3339Nano), rb.FinishedAt.Format(time.RFC3339Nano), rc.FinishedAt.Format(time.RFC3339Nano))
		}
		if rd.Attempt > 1 {
			rescuedD++
		}
	}
	t.Logf("%d kills (%v); every diamond settled %v after the enqueue; %d Ds ran again after a kill, each applied once",
		len(victims), victims, time.Since(began).Round(time.Millisecond), rescuedD)
}
