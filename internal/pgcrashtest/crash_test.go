package pgcrashtest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// slack is added to every timing bound, for a loaded machine (-race, two
// cores, other packages' tests running).
const slack = 4 * time.Second

// TestKilledWorkerRescuedAndAppliedOnce: three worker processes work
// 20,000 tasks; one (not the leader) is SIGKILLed mid-run and restarted.
// Every task succeeds with its effect (written with CompleteTx in the
// handler's transaction) applied exactly once, none is left running, and
// every task the killed worker held is rescued (lease_expired) within
// LeaseTTL + RescueInterval (+ slack) of the kill and picked up again within
// the same bound, in queue order (no task that became runnable later
// overtakes it).
func TestKilledWorkerRescuedAndAppliedOnce(t *testing.T) {
	e := setup(t, "kill")
	const total = 20000
	e.enqueue(total)
	workers := map[string]*worker{}
	for _, n := range []string{"w1", "w2", "w3"} {
		workers[n] = e.startWorker(n, 20*time.Millisecond)
	}
	e.waitFor("a fifth of the tasks to succeed", 60*time.Second, func() bool {
		return e.counts()[driver.StateSucceeded] >= total/5
	})
	// The victim is a worker that is not the leader (TestLeaderFailover
	// kills the leader) and is running tasks right now.
	var victim *worker
	e.waitFor("a non-leader worker with running tasks", 20*time.Second, func() bool {
		leader := e.leader()
		for _, n := range []string{"w1", "w2", "w3"} {
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
	t.Logf("killed %s (leader %s) running %d tasks just before, holding %d after; %d of %d succeeded",
		victim.Name, e.leader(), before, len(held), done, total)
	if done >= total-1000 {
		t.Fatalf("the kill landed too late: %d of %d tasks had succeeded", done, total)
	}
	e.startWorker(victim.Name+"-restarted", 20*time.Millisecond)

	e.waitAllSucceeded(total, 75*time.Second)
	e.checkExactlyOnce(total)

	rescued := e.rescued()
	if len(rescued) == 0 {
		t.Fatal("no task was rescued")
	}
	// A rescued task keeps its place in line (run_at = the run_at it was
	// claimed at + backoff), so even under the backlog it is picked up again
	// within LeaseTTL + RescueInterval of the kill, and no task that became
	// runnable later overtakes it.
	var ids []int64
	var maxRescue, minPickup, maxPickup time.Duration
	bound := leaseTTL + rescueInterval + slack
	for i, r := range rescued {
		ids = append(ids, r.ID)
		for _, ae := range r.Errors {
			if ae.Outcome != driver.OutcomeLeaseExpired {
				continue
			}
			if ae.Node != victim.Name {
				t.Fatalf("task %d: lease expired under %s; only %s was killed", r.ID, ae.Node, victim.Name)
			}
			next, ok := nextStart(r, ae.Attempt)
			if !ok {
				t.Fatalf("task %d: no attempt after the expired attempt %d: %+v", r.ID, ae.Attempt, r)
			}
			rescue, pickup := ae.End.Sub(killedAt), next.Sub(killedAt)
			if i == 0 || pickup < minPickup {
				minPickup = pickup
			}
			maxPickup, maxRescue = max(maxPickup, pickup), max(maxRescue, rescue)
			if rescue > bound {
				t.Errorf("task %d: rescued %v after the kill, want within %v", r.ID, rescue, bound)
			}
			if pickup > bound {
				t.Errorf("task %d: picked up again %v after the kill, want within %v", r.ID, pickup, bound)
			}
			if next.Before(ae.End) {
				t.Errorf("task %d: next attempt at %v before the rescue at %v", r.ID, next, ae.End)
			}
			var overtook int64
			if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM `+e.schema+`.keel_tasks
				WHERE run_at > $1::timestamptz + interval '1 second' AND started_at < $2::timestamptz - interval '1 second'`,
				r.RunAt, next).Scan(&overtook); err != nil {
				t.Fatal(err)
			}
			if overtook > 0 {
				t.Errorf("task %d (runnable at %v) was picked up at %v, after %d tasks runnable later than it", r.ID, r.RunAt, next, overtook)
			}
		}
	}
	// Every task the victim held at its death was rescued, except one whose
	// completion was already committing when the kill landed.
	for _, id := range held {
		if !slices.Contains(ids, id) {
			var node string
			if err := e.pool.QueryRow(e.ctx, `SELECT node FROM `+e.schema+`.effects WHERE task_id = $1`, id).Scan(&node); err != nil || node != victim.Name {
				t.Errorf("task %d was running under %s at the kill but was not rescued (effect by %q, %v)", id, victim.Name, node, err)
			}
		}
	}
	t.Logf("%d tasks rescued at most %v after the kill (bound %v); picked up again %v to %v after the kill, in queue order",
		len(rescued), maxRescue, bound, minPickup, maxPickup)
}

// TestTerminatedSessions: while three workers run and the test enqueues,
// every database session of the workers and of the test's enqueuer is
// terminated (pg_terminate_backend) several times. Workers and enqueuer
// reconnect on their own; every enqueue that returned success is stored
// and succeeds, and every task's effect is applied exactly once.
func TestTerminatedSessions(t *testing.T) {
	e := setup(t, "term")
	enq := e.enqueuer(e.app) // its sessions are terminated too
	for _, n := range []string{"t1", "t2", "t3"} {
		e.startWorker(n, 3*time.Millisecond)
	}
	stop := make(chan struct{})
	acked, failed, wg := e.enqueueLoop(enq, 4, stop)

	var terminated []int64
	for range 4 {
		time.Sleep(1200 * time.Millisecond)
		var n int64
		err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()) k`, e.app).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		terminated = append(terminated, n)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	if slices.Contains(terminated, 0) {
		t.Fatalf("sessions terminated per round %v: a round found none", terminated)
	}
	ids := acked()
	t.Logf("terminated sessions per round %v; %d enqueues acknowledged, %d failed", terminated, len(ids), failed())
	if len(ids) < 100 {
		t.Fatalf("only %d enqueues acknowledged", len(ids))
	}
	var total int64
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM `+e.schema+`.keel_tasks`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	e.waitAllSucceeded(total, 60*time.Second)
	e.checkAcked(ids)
	e.checkExactlyOnce(total)
}

// TestLeaderFailover: the leader is SIGKILLed while it runs tasks. Another
// node takes the maintenance lease within LeaseTTL (+ slack), the new
// leader rescues the tasks the old one held, every task succeeds once, and
// the dead leader's node row is pruned while the live nodes stay listed.
func TestLeaderFailover(t *testing.T) {
	e := setup(t, "lead")
	const total = 600
	e.enqueue(total)
	workers := map[string]*worker{}
	for _, n := range []string{"l1", "l2", "l3"} {
		workers[n] = e.startWorker(n, 300*time.Millisecond)
	}
	var old string
	e.waitFor("a leader running tasks", 30*time.Second, func() bool {
		old = e.leader()
		return old != "" && len(e.runningOf(old)) >= 2
	})
	killedAt := e.kill(workers[old])
	time.Sleep(300 * time.Millisecond) // see TestKilledWorkerRescuedAndAppliedOnce
	held := e.runningOf(old)
	if len(held) == 0 {
		t.Fatalf("leader %s held no running task after the kill", old)
	}
	var next string
	e.waitFor("another node to take the leadership", leaseTTL+slack, func() bool {
		next = e.leader()
		return next != "" && next != old
	})
	takeover := time.Since(killedAt)
	t.Logf("leader %s killed holding %d tasks; %s took over after %v", old, len(held), next, takeover)
	if takeover > leaseTTL+slack {
		t.Fatalf("takeover after %v, want within %v", takeover, leaseTTL+slack)
	}

	e.waitAllSucceeded(total, 60*time.Second)
	e.checkExactlyOnce(total)
	rescued := e.rescued()
	newLog := workers[next].Stderr.String()
	for _, r := range rescued {
		if !slices.Contains(held, r.ID) {
			t.Errorf("task %d rescued but not held by the killed leader", r.ID)
		}
		if len(logLines(newLog, "rescued task whose lease expired", fmt.Sprintf("task_id=%d ", r.ID))) == 0 {
			t.Errorf("task %d: the new leader %s did not log its rescue", r.ID, next)
		}
	}
	if len(rescued) == 0 {
		t.Fatalf("none of the %d tasks the killed leader held was rescued", len(held))
	}
	for _, id := range held {
		if !slices.ContainsFunc(rescued, func(r driver.TaskRow) bool { return r.ID == id }) {
			t.Errorf("task %d held by the killed leader was not rescued", id)
		}
	}
	if got := e.leader(); got != next {
		t.Errorf("leadership moved again, to %q", got)
	}

	// The node registry: the dead leader's row goes once it is silent for
	// three lease TTLs; the live nodes stay with fresh heartbeats.
	e.waitFor("the dead leader's node row to be pruned", 3*leaseTTL+slack, func() bool {
		nodes, err := e.client.Nodes(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return !slices.ContainsFunc(nodes, func(n keel.NodeInfo) bool { return n.Name == old })
	})
	nodes, err := e.client.Nodes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
		if age := time.Since(n.HeartbeatAt); age > heartbeatInterval+slack {
			t.Errorf("node %s: last heartbeat %v ago", n.Name, age)
		}
	}
	if len(names) != 2 || slices.Contains(names, old) {
		t.Fatalf("nodes %v, want the two survivors", names)
	}
	t.Logf("%d tasks rescued by %s; nodes now %v", len(rescued), next, names)
}

// enqueueLoop enqueues one task at a time from n goroutines until stop is
// closed, counting failures (expected while sessions die) and recording
// every acknowledged id.
func (e *env) enqueueLoop(c enqueuer, n int, stop <-chan struct{}) (acked func() []int64, failed func() int, wg *sync.WaitGroup) {
	var mu sync.Mutex
	var ids []int64
	fails := 0
	wg = &sync.WaitGroup{}
	for g := range n {
		wg.Go(func() {
			for i := g; ; i += n {
				select {
				case <-stop:
					return
				default:
				}
				info, err := c.Enqueue(e.ctx, taskType, job{N: i})
				mu.Lock()
				if err != nil {
					fails++
				} else {
					ids = append(ids, info.ID)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	acked = func() []int64 { mu.Lock(); defer mu.Unlock(); return slices.Clone(ids) }
	failed = func() int { mu.Lock(); defer mu.Unlock(); return fails }
	return acked, failed, wg
}

// checkAcked checks that every acknowledged task exists and succeeded.
func (e *env) checkAcked(ids []int64) {
	e.t.Helper()
	for _, id := range ids {
		r, err := e.drv.Get(e.ctx, id)
		if err != nil {
			e.t.Fatalf("acknowledged task %d: %v", id, err)
		}
		if r.State != driver.StateSucceeded {
			e.t.Fatalf("acknowledged task %d: state %s, want succeeded", id, r.State)
		}
	}
}
