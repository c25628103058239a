package mysqlcrashtest

import (
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// TestKilledWorkerNothingLost: three worker processes work 5,000 tasks; one
// (not the leader, when it can be told apart) is SIGKILLed mid-run and
// restarted. Every task succeeds with its effect (written with CompleteTx in
// a *sql.Tx of the driver's DB()) applied exactly once, none is left
// running, and every task the killed worker held is rescued: its error
// history has a lease_expired entry naming the killed node, within
// LeaseTTL + RescueInterval (+ slack) of the kill.
func TestKilledWorkerNothingLost(t *testing.T) {
	e := setup(t)
	const total = 5000
	e.enqueue(total)
	names := []string{"w1", "w2", "w3"}
	workers := map[string]*worker{}
	for _, n := range names {
		workers[n] = e.startWorker(n, 20*time.Millisecond)
	}
	e.waitFor("a fifth of the tasks to succeed", 60*time.Second, func() bool {
		return e.counts()[driver.StateSucceeded] >= total/5
	})
	// The victim runs tasks right now; a non-leader is preferred, so the
	// rescue does not also wait for a leadership takeover.
	var victim *worker
	e.waitFor("a worker with running tasks", 20*time.Second, func() bool {
		leader := e.leader()
		for _, n := range names {
			if n != leader && len(e.runningOf(n)) >= 3 {
				victim = workers[n]
				return true
			}
		}
		return false
	})
	before := len(e.runningOf(victim.Name))
	killedAt := e.kill(victim)
	// The server may still be committing what the victim sent before it
	// died; what is running after that was left behind.
	time.Sleep(300 * time.Millisecond)
	held := e.runningOf(victim.Name)
	done := e.counts()[driver.StateSucceeded]
	t.Logf("killed %s (leader %q) running %d tasks just before, holding %d after; %d of %d succeeded",
		victim.Name, e.leader(), before, len(held), done, total)
	if done >= total-500 {
		t.Fatalf("the kill landed too late: %d of %d tasks had succeeded", done, total)
	}
	if len(held) == 0 {
		t.Fatalf("%s held no running task after the kill", victim.Name)
	}
	e.startWorker(victim.Name+"-restarted", 20*time.Millisecond)

	e.waitAllSucceeded(total, 60*time.Second)
	finished := time.Since(killedAt)
	e.checkExactlyOnce(total)
	if n := len(e.runningOf(victim.Name)); n != 0 {
		t.Fatalf("%d tasks still running under the killed %s", n, victim.Name)
	}

	rescued := e.rescued()
	if len(rescued) == 0 {
		t.Fatal("no task was rescued")
	}
	bound := leaseTTL + rescueInterval + slack
	var maxRescue time.Duration
	var ids []int64
	for _, r := range rescued {
		ids = append(ids, r.ID)
		for _, ae := range r.Errors {
			if ae.Outcome != driver.OutcomeLeaseExpired {
				continue
			}
			if ae.Node != victim.Name {
				t.Errorf("task %d: lease expired under %s; only %s was killed", r.ID, ae.Node, victim.Name)
			}
			rescue := ae.End.Sub(killedAt)
			maxRescue = max(maxRescue, rescue)
			if rescue > bound {
				t.Errorf("task %d: rescued %v after the kill, want within %v", r.ID, rescue, bound)
			}
			if r.Attempt <= ae.Attempt {
				t.Errorf("task %d: final attempt %d, not after the expired attempt %d", r.ID, r.Attempt, ae.Attempt)
			}
		}
	}
	// Every task the victim held at its death was rescued, except one whose
	// completion was already committing when the kill landed.
	for _, id := range held {
		if slices.Contains(ids, id) {
			continue
		}
		var node string
		err := e.db.QueryRowContext(e.ctx, `SELECT node FROM effects WHERE task_id = ?`, id).Scan(&node)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if node != victim.Name {
			t.Errorf("task %d was running under %s at the kill but was not rescued (effect by %q)", id, victim.Name, node)
		}
	}
	t.Logf("%d tasks rescued at most %v after the kill (bound %v); all %d succeeded %v after the kill",
		len(rescued), maxRescue, bound, total, finished)
}
