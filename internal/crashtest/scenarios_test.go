package crashtest

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/proctest"
)

// run runs every crash scenario against database b, one after the other:
// they assert rescue times, so they do not share the CPUs.
func run(t *testing.T, b *backend) {
	t.Run("KilledWorker", func(t *testing.T) { killedWorker(t, b) })
	t.Run("KilledEnqueuer", func(t *testing.T) { killedEnqueuer(t, b) })
	t.Run("LeaderFailover", func(t *testing.T) { leaderFailover(t, b) })
	t.Run("TerminatedSessions", func(t *testing.T) { terminatedSessions(t, b) })
	t.Run("DeadFollowUps", func(t *testing.T) { deadFollowUps(t, b) })
	t.Run("ScheduleFailover", func(t *testing.T) { scheduleFailover(t, b) })
	t.Run("KilledInStep", func(t *testing.T) { killedInStep(t, b) })
	t.Run("ClusterLimit", func(t *testing.T) { clusterLimit(t, b) })
	t.Run("KilledWorkersNoBrake", func(t *testing.T) { killedWorkersNoBrake(t, b) })
	t.Run("BatchUnderKills", func(t *testing.T) { batchUnderKills(t, b) })
	t.Run("DiamondUnderKills", func(t *testing.T) { diamondUnderKills(t, b) })
	t.Run("SequencesUnderKills", func(t *testing.T) { sequencesUnderKills(t, b) })
}

// killedWorker: b.killWorkers worker processes work b.killTasks tasks; one (not
// the leader) is SIGKILLed mid-run and restarted. Every task succeeds with
// its effect (written with CompleteTx in the handler's transaction) applied
// exactly once, none is left running, and every task the killed worker held
// is rescued (one lease_expired entry naming it, then exactly one more
// attempt) within LeaseTTL + RescueInterval (+ slack) of the kill and picked
// up again within the same bound, in queue order (no task that became
// runnable later overtakes it). No other task needed a second attempt.
func killedWorker(t *testing.T, b *backend) {
	e := setup(t, b)
	total := b.killTasks
	e.enqueue(total)
	var names []string
	for i := range b.killWorkers {
		names = append(names, fmt.Sprintf("w%d", i+1))
	}
	workers := map[string]*worker{}
	for _, n := range names {
		workers[n] = e.startWorker(n, 20*time.Millisecond)
	}
	e.waitFor("a fifth of the tasks to succeed", 60*time.Second, func() bool {
		return e.counts()[driver.StateSucceeded] >= int64(total/5)
	})
	// The victim is a worker that is not the leader (leaderFailover kills
	// the leader) unless it is the only one, and is running tasks right now.
	// A kill can still land in the gap between a worker's batches, when it
	// holds nothing: then there is nothing to rescue, so the worker is
	// restarted under a new name and another kill is tried.
	var victim *worker
	var held []int64
	var killedAt time.Time
	for try := 1; ; try++ {
		e.waitFor("a non-leader worker with running tasks", 20*time.Second, func() bool {
			leader := e.leader()
			for _, n := range names {
				if (n != leader || len(names) == 1) && len(e.runningOf(n)) >= 3 {
					victim = workers[n]
					return true
				}
			}
			return false
		})
		before := len(e.runningOf(victim.Name))
		killedAt = e.kill(victim)
		// The server may still be committing what the victim sent before it
		// died; what is running after that was left behind.
		time.Sleep(300 * time.Millisecond)
		held = e.runningOf(victim.Name)
		e.checkCounters("just after the kill")
		done := e.counts()[driver.StateSucceeded]
		t.Logf("kill %d: killed %s (leader %q) running %d tasks just before, holding %d after; %d of %d succeeded",
			try, victim.Name, e.leader(), before, len(held), done, total)
		if done >= int64(total-total/10) {
			t.Fatalf("the kill landed too late: %d of %d tasks had succeeded", done, total)
		}
		if len(held) > 0 {
			break
		}
		if try == 5 {
			t.Fatalf("%s held no running task after %d kills", victim.Name, try)
		}
		name := fmt.Sprintf("%s-again%d", victim.Name, try)
		delete(workers, victim.Name)
		names = slices.DeleteFunc(names, func(n string) bool { return n == victim.Name })
		workers[name] = e.startWorker(name, 20*time.Millisecond)
		names = append(names, name)
	}
	e.startWorker(victim.Name+"-restarted", 20*time.Millisecond)

	e.waitAllSucceeded(int64(total), 75*time.Second)
	finished := time.Since(killedAt)
	e.checkExactlyOnce(int64(total))

	retried := e.retried()
	if len(retried) == 0 {
		t.Fatal("no task was rescued")
	}
	// A rescued task keeps its place in line (run_at = the run_at it was
	// claimed at + backoff; the tasks' run_at are runAtStep apart), so even
	// under the backlog it is picked up again within LeaseTTL +
	// RescueInterval of the kill, and no task that became runnable later
	// overtakes it.
	bound := leaseTTL + rescueInterval + slack
	var ids []int64
	var maxRescue, minPickup, maxPickup time.Duration
	for i, r := range retried {
		ids = append(ids, r.ID)
		exp := expired(r)
		if len(exp) != 1 || len(r.Errors) != 1 {
			t.Errorf("task %d: attempt %d, error history %+v; want exactly one entry, lease_expired from the kill", r.ID, r.Attempt, r.Errors)
			continue
		}
		ae := exp[0]
		if ae.Node != victim.Name {
			t.Errorf("task %d: lease expired under %s; only %s was killed", r.ID, ae.Node, victim.Name)
		}
		if !slices.Contains(held, r.ID) {
			t.Errorf("task %d rescued but not running under %s at the kill", r.ID, victim.Name)
		}
		if r.Attempt != ae.Attempt+1 {
			t.Errorf("task %d: final attempt %d, want the one after the expired attempt %d", r.ID, r.Attempt, ae.Attempt)
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
		// Overtaking counts from the rescue: until then the task was held
		// and the line moved on without it. Both times get a second's slack.
		overtook := e.count(`SELECT count(*) FROM keel_tasks WHERE run_at > ? AND started_at > ? AND started_at < ?`,
			b.timeArg(r.RunAt.Add(time.Second)), b.timeArg(ae.End.Add(time.Second)), b.timeArg(next.Add(-time.Second)))
		if overtook > 0 {
			t.Errorf("task %d (runnable at %v, rescued at %v) was picked up at %v, after %d tasks runnable later than it", r.ID, r.RunAt, ae.End, next, overtook)
		}
	}
	// Every task the victim held at its death was rescued, except one whose
	// completion was already committing when the kill landed.
	for _, id := range held {
		if slices.Contains(ids, id) {
			continue
		}
		var node string
		err := e.db.QueryRowContext(e.ctx, b.rebind(`SELECT node FROM effects WHERE task_id = ?`), id).Scan(&node)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatal(err)
		}
		if node != victim.Name {
			t.Errorf("task %d was running under %s at the kill but was not rescued (effect by %q)", id, victim.Name, node)
		}
	}
	t.Logf("%d tasks rescued at most %v after the kill (bound %v); picked up again %v to %v after the kill, in queue order; all %d succeeded %v after the kill",
		len(retried), maxRescue, bound, minPickup, maxPickup, total, finished)
}

// killedEnqueuer: an enqueue that returned survives a SIGKILL of its
// process that lands while other enqueues are in flight.
func killedEnqueuer(t *testing.T, b *backend) {
	e := setup(t, b)
	cmd := e.helperCmd("enqueue", "enqueuer", 0)
	stderr := &proctest.Buffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill() //nolint:errcheck // it may have exited
			cmd.Wait()         //nolint:errcheck // killed
		}
		if t.Failed() {
			t.Logf("enqueuer stderr (last 4 kB):\n%s", proctest.Tail(stderr.String(), 4096))
		}
	})
	acked := map[int64]int{}
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "acked" {
			continue
		}
		id, err1 := strconv.ParseInt(f[1], 10, 64)
		n, err2 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("enqueuer output %q: %v", sc.Text(), err)
		}
		acked[id] = n
		if len(acked) == 300 && !killed {
			killed = true
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("the enqueuer ended before it was killed, after %d acks: %v", len(acked), err)
	}
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("enqueuer exit: %v, want killed", err)
	}
	for id, n := range acked {
		row, err := e.drv.Get(e.ctx, id)
		if err != nil {
			t.Fatalf("acked task %d lost after the kill: %v", id, err)
		}
		var got job
		if err := json.Unmarshal(row.Payload, &got); err != nil || got.N != n || row.State != driver.StatePending {
			t.Fatalf("acked task %d: payload %s (%v) state %s, want n=%d pending", id, row.Payload, err, row.State, n)
		}
	}
	t.Logf("%d acked tasks survived, %d tasks stored", len(acked), e.counts()[driver.StatePending])
}

// leaderFailover: the leader is SIGKILLed while it runs tasks; it is
// internal/chaos's kill-leader scenario, which keel chaos runs (one
// implementation): another node takes the maintenance lease within a lease
// (+ slack), the new leader rescues the tasks the old one held and logs
// each rescue, every task succeeds with its effect applied once, and the
// dead leader's node row is pruned while the live nodes stay listed.
func leaderFailover(t *testing.T, b *backend) { runChaos(t, b, "kill-leader") }

// terminatedSessions: while three workers run and the test enqueues, every
// database session of the workers and of the test's enqueuer is terminated
// several times. Workers and enqueuer reconnect on their own; every enqueue
// that returned success is stored and succeeds, and every task's effect is
// applied exactly once.
func terminatedSessions(t *testing.T, b *backend) {
	if b.terminate == nil {
		t.Skipf("%s: the test cannot tell the workers' sessions from its own, so it cannot end only theirs", b.name)
	}
	e := setup(t, b)
	enq := e.enqueuer(e.app) // its sessions are terminated too
	for _, n := range []string{"t1", "t2", "t3"} {
		e.startWorker(n, 3*time.Millisecond)
	}
	stop := make(chan struct{})
	acked, failed, wg := e.enqueueLoop(enq, 4, stop)

	var terminated []int64
	for range 4 {
		time.Sleep(1200 * time.Millisecond)
		n, err := b.terminate(e, e.app)
		if err != nil {
			close(stop)
			wg.Wait()
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
	total := e.taskCount()
	e.waitAllSucceeded(total, 60*time.Second)
	e.checkAcked(ids)
	e.checkExactlyOnce(total)
}
