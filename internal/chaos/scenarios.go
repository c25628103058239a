package chaos

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// The scenarios' sizes and bounds.
const (
	// workDelay is how long a task's handler runs: long enough that a
	// worker always holds tasks, short enough that a scenario's tasks
	// drain in seconds.
	workDelay = 100 * time.Millisecond
	// slack is added to every timing bound, for a loaded machine.
	slack = 4 * time.Second
	// cutFor is how long the cut scenario holds every connection cut:
	// longer than DefaultTiming's lease, so the cut also costs leases.
	cutFor = 4 * time.Second
	// termLonger is how much longer the SIGTERM scenario's handlers run
	// than the worker's stop deadline, so Stop has handlers to cancel and
	// tasks to release.
	termLonger = 1500 * time.Millisecond
	// stopTries is how many times the stop-worker scenario stops a
	// worker at most (see stopWorker).
	stopTries = 4
	// stepTasks is how many tasks the kill-in-step scenario runs.
	stepTasks = 4
)

// rescueBound is how soon after a worker's death its tasks must be
// rescued: its lease runs out, then the leader's next rescue pass.
func (r *run) rescueBound() time.Duration {
	return r.o.Timing.LeaseTTL + r.o.Timing.RescueInterval + slack
}

// many is how many tasks a scenario works: fewer on SQLite, where every
// completion is a write of its own under the one write lock, and fewer
// when the types' limits (Options.Types) would not let them drain in
// limitedDrain.
func (r *run) many() int {
	n := 600
	if r.sp.kind == SQLite {
		n = 300
	}
	if pace := r.pace(); pace > 0 {
		n = min(n, max(20, int(pace*limitedDrain.Seconds())))
	}
	return n
}

// limitedDrain is how long the work of a scenario may take to drain under
// the types' limits.
const limitedDrain = 30 * time.Second

// pace bounds the tasks a second the work types' limits let through, all
// types together (their tasks come round robin, so the slowest type sets
// the pace); 0 when nothing limits them. A capped type runs at most
// Concurrency tasks per workDelay.
func (r *run) pace() float64 {
	slowest := math.Inf(1)
	for _, t := range r.o.Types {
		p := math.Inf(1)
		if t.Rate > 0 {
			p = t.Rate
		}
		if t.Concurrency > 0 {
			p = min(p, float64(t.Concurrency)/workDelay.Seconds())
		}
		slowest = min(slowest, p)
	}
	if math.IsInf(slowest, 1) {
		return 0
	}
	return slowest * float64(len(r.o.Types))
}

// atOnce is n, or 1 when every work type has a concurrency cap: a worker
// may then never hold n tasks.
func (r *run) atOnce(n int) int {
	if len(r.o.Types) == 0 {
		return n
	}
	for _, t := range r.o.Types {
		if t.Concurrency == 0 {
			return n
		}
	}
	return 1
}

// prepare enqueues the scenario's tasks, starts the workers and waits
// until a fifth of the tasks finished, so the fault lands mid-run.
func (r *run) prepare(dsn string) ([]*proc, error) {
	if err := r.enqueueWork(r.many()); err != nil {
		return nil, err
	}
	ps, err := r.startWorkers(r.o.Workers, workDelay, dsn)
	if err != nil {
		return nil, err
	}
	return ps, r.finishedAtLeast(r.res.Tasks/5, time.Minute)
}

// needTwo skips a scenario that needs a second worker to take over.
func (r *run) needTwo() error {
	if r.o.Workers < 2 {
		return skipError{"needs at least two workers: one to fault, one to take over"}
	}
	return nil
}

// fault faults victim (kill or stop; it returns the time just before the
// signal) and returns that time and the tasks victim held: those running
// under it 300ms later, once the server has committed what victim sent
// before the signal.
func (r *run) fault(victim *proc, do func() time.Time) (time.Time, []int64, error) {
	at := do()
	time.Sleep(300 * time.Millisecond)
	held, err := r.runningOf(victim.node)
	return at, held, err
}

// checkRescues records the rescues of node's tasks after at, and fails
// when none was rescued or one was late, or when a task node held at the
// fault (held) was neither rescued from it (a lease_expired entry naming
// it) nor completed by it (its ledger row: the completion was committing
// as the fault landed).
func (r *run) checkRescues(node string, at time.Time, held []int64) error {
	n, last, err := r.rescues(node, at)
	if err != nil {
		return err
	}
	r.res.Rescued, r.res.RescueTime = n, Duration(last)
	if n == 0 {
		r.failf("none of the %d tasks %s held was rescued", len(held), node)
	}
	if last > r.rescueBound() {
		r.failf("a task of %s was rescued %v after the fault, want within %v (lease %v + rescue interval %v + %v)",
			node, last.Round(time.Millisecond), r.rescueBound(), r.o.Timing.LeaseTTL, r.o.Timing.RescueInterval, slack)
	}
	byNode := r.sp.rebind(`SELECT count(*) FROM ` + r.sp.table(ledger) + ` WHERE task_id = ? AND node = ?`)
	for _, id := range held {
		t, err := r.drv.Get(r.ctx, id)
		if err != nil {
			return err
		}
		if rescuedFrom(t, node) {
			continue
		}
		var own int
		if err := r.db.QueryRowContext(r.ctx, byNode, id, node).Scan(&own); err != nil {
			return err
		}
		if own == 0 {
			r.failf("task %d was running under %s at the fault but was neither rescued from it nor completed by it", id, node)
		}
	}
	return nil
}

// rescuedFrom reports whether task t was rescued from node: an attempt of
// its expired there.
func rescuedFrom(t *driver.TaskRow, node string) bool {
	return slices.ContainsFunc(t.Errors, func(ae driver.AttemptError) bool {
		return ae.Outcome == driver.OutcomeLeaseExpired && ae.Node == node
	})
}

// killWorker SIGKILLs a worker (not the leader) while it runs tasks and
// starts another. Every task it held must be rescued when its lease
// expires, and every task applied once.
func killWorker(r *run) error {
	ps, err := r.prepare("")
	if err != nil {
		return err
	}
	for try := 1; ; try++ {
		victim, err := r.busyWorker(ps, r.atOnce(2), true)
		if err != nil {
			return err
		}
		at, held, err := r.fault(victim, victim.kill)
		if err != nil {
			return err
		}
		p, err := r.startWorker("work", workDelay, "")
		if err != nil {
			return err
		}
		ps = append(ps, p)
		if len(held) > 0 {
			// A line of tasks runnable after the victim's, so that its
			// rescued tasks must keep their place in it (checkRetried).
			if err := r.enqueueLine(r.line()); err != nil {
				return err
			}
			if err := r.settle(); err != nil {
				return err
			}
			if err := r.checkRescues(victim.node, at, held); err != nil {
				return err
			}
			return r.checkRetried(victim.node, at, held)
		}
		if try == 5 {
			return fmt.Errorf("after %d kills no killed worker held a task", try)
		}
	}
}

// line is how many tasks keep the workers busy until the killed worker's
// tasks have been rescued and half as long again (at most 3,000, and no
// more than the types' limits drain in limitedDrain): the line the rescued
// tasks must keep their place in.
func (r *run) line() int {
	perSecond := float64(r.o.Workers*slotsPerWorker) / workDelay.Seconds()
	pace := r.pace()
	if pace > 0 {
		perSecond = min(perSecond, pace)
	}
	n := int(perSecond * (r.o.Timing.LeaseTTL + r.o.Timing.RescueInterval).Seconds() * 1.5)
	if pace > 0 {
		n = min(n, int(pace*limitedDrain.Seconds()))
	}
	return max(20, min(n, 3000))
}

// checkRetried checks every task that needed a second attempt after the
// kill of node at: it must be one node held then, with one entry in its
// history, its lease expired there, and the attempt after it; it was
// picked up again within the rescue bound, and in its place in line: no
// task of its type runnable later than it (by a second) started between
// its rescue and its new start (each with a second's slack). A live
// worker's task run twice fails it: a lease that ran out under a live
// process is the fault keel's renewals exist to prevent.
func (r *run) checkRetried(node string, at time.Time, held []int64) error {
	ids, err := r.ints(`SELECT id FROM %s WHERE attempt > 1 ORDER BY id`)
	if err != nil {
		return err
	}
	overtaken := r.sp.rebind(`SELECT count(*) FROM ` + r.sp.table("keel_tasks") +
		` WHERE type = ? AND run_at > ? AND started_at > ? AND started_at < ?`)
	var worst time.Duration
	for _, id := range ids {
		t, err := r.drv.Get(r.ctx, id)
		if err != nil {
			return err
		}
		if t.Type == stepsType || !slices.Contains(r.ids, id) {
			continue
		}
		if len(t.Errors) != 1 || t.Errors[0].Outcome != driver.OutcomeLeaseExpired || t.Errors[0].Node != node || !slices.Contains(held, id) {
			r.failf("task %d needed attempt %d, history %s; only the tasks %s held at its kill should have run twice, each once rescued from it",
				id, t.Attempt, history(t.Errors), node)
			continue
		}
		ae := t.Errors[0]
		if t.Attempt != ae.Attempt+1 {
			r.failf("task %d: attempt %d after its attempt %d expired, want the one after it", id, t.Attempt, ae.Attempt)
		}
		next := t.AttemptedAt
		pickup := next.Sub(at)
		worst = max(worst, pickup)
		if pickup > r.rescueBound() {
			r.failf("task %d: picked up again %v after the kill, want within %v", id, pickup.Round(time.Millisecond), r.rescueBound())
		}
		var n int
		if err := r.db.QueryRowContext(r.ctx, overtaken, t.Type, r.sp.timeArg(t.RunAt.Add(time.Second)),
			r.sp.timeArg(ae.End.Add(time.Second)), r.sp.timeArg(next.Add(-time.Second))).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			r.failf("task %d (runnable at %v, rescued at %v) was picked up again at %v, after %d tasks runnable later than it",
				id, t.RunAt.Format(time.StampMilli), ae.End.Format(time.StampMilli), next.Format(time.StampMilli), n)
		}
	}
	if worst > 0 {
		r.notef("the rescued tasks were picked up again at most %v after the kill, in queue order", worst.Round(time.Millisecond))
	}
	return nil
}

// history is a task's failed attempts, briefly.
func history(errs []driver.AttemptError) string {
	var b strings.Builder
	for i, ae := range errs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "#%d %s under %s", ae.Attempt, ae.Outcome, ae.Node)
	}
	return "[" + b.String() + "]"
}

// stopWorker SIGSTOPs a worker (not the leader) while it runs tasks,
// waits until its tasks were rescued (its lease ran out), then SIGCONTs
// it. The resumed worker's late completions must be fenced: every task
// applied once, and the worker keeps working. A task whose row the
// stopped worker had locked (it was committing the task's completion) is
// not rescued: no database lets another session take a row lock held by
// an open transaction, so that task waits for the worker to resume (or
// for the server to drop its connection).
//
// A worker stopped inside a transaction holds its locks: on SQLite the
// database's one write lock, so every other process waits for it; on
// PostgreSQL and MariaDB the rows it locked, among them all its tasks
// while it renews their leases. Nothing it locked can be rescued until it
// resumes (or the server drops its connection). The scenario then notes
// it, resumes the worker and stops one again, up to stopTries times; if
// every stop lands so, it checks the ledger alone.
func stopWorker(r *run) error {
	if err := r.needTwo(); err != nil {
		return err
	}
	ps, err := r.prepare("")
	if err != nil {
		return err
	}
	stalled := 0
	for try := 1; try <= stopTries; try++ {
		if try > 1 {
			// More work, so that the next stop finds a worker busy.
			if err := r.enqueueWork(r.many() / 2); err != nil {
				return err
			}
		}
		victim, err := r.busyWorker(ps, r.atOnce(2), true)
		if err != nil {
			return err
		}
		at, held, err := r.fault(victim, func() time.Time { return victim.signal(syscall.SIGSTOP) })
		if err != nil || len(held) == 0 {
			// It finished its tasks before it stopped, or they were
			// rescued already (resumed after a stop before): nothing to
			// rescue.
			victim.signal(syscall.SIGCONT)
			if err != nil {
				return err
			}
			continue
		}
		err = r.waitFor("a task of the stopped worker to be rescued", r.rescueBound(), func() (bool, error) {
			ids, err := r.runningOf(victim.node)
			return len(ids) < len(held), err
		})
		if err != nil {
			r.logLockWaits()
			victim.signal(syscall.SIGCONT)
			r.notef("stop %d landed inside a transaction of %s: none of the %d tasks it held was rescued within %v, until it resumed (%s)",
				try, victim.node, len(held), r.rescueBound(), r.lockedBy())
			stalled++
			continue
		}
		// Every task it held whose lease expired is rescued within two
		// rescue passes; a task it was completing when it stopped stays
		// locked by its open transaction until it resumes and commits.
		time.Sleep(2 * r.o.Timing.RescueInterval)
		if locked, err := r.runningOf(victim.node); err == nil && len(locked) > 0 {
			r.notef("%d of the %d tasks %s held stayed locked by its open transaction until it resumed", len(locked), len(held), victim.node)
		}
		victim.signal(syscall.SIGCONT)
		if err := r.settle(); err != nil {
			return err
		}
		if !victim.alive() {
			r.failf("the resumed worker %s exited: %s", victim.node, victim.stderr.tail(500))
		}
		return r.checkRescues(victim.node, at, held)
	}
	if stalled == 0 {
		return fmt.Errorf("after %d stops no stopped worker held a task", stopTries)
	}
	// Every stop that found tasks landed inside a transaction: the
	// promises are still checked, on the resumed workers' work.
	r.notef("no stop could be waited out: the ledger was checked, the rescue of a stopped worker's tasks was not")
	return r.settle()
}

// killLeader SIGKILLs the worker holding the maintenance lease while it
// runs tasks. Another takes the lease within a lease's time and rescues
// what the dead leader held, logging each rescue; the dead leader's node
// row is pruned while the live workers stay listed; every task applied
// once.
func killLeader(r *run) error {
	if err := r.needTwo(); err != nil {
		return err
	}
	ps, err := r.prepare("")
	if err != nil {
		return err
	}
	var victim *proc
	err = r.waitFor("a leader running tasks", 30*time.Second, func() (bool, error) {
		leader, err := r.leader()
		if err != nil || leader == "" {
			return false, err
		}
		for _, p := range ps {
			if p.node == leader {
				held, err := r.runningOf(leader)
				victim = p
				return len(held) >= 2, err
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	at, held, err := r.fault(victim, victim.kill)
	if err != nil {
		return err
	}
	var next string
	err = r.waitFor("another worker to take the leadership", r.o.Timing.LeaseTTL+slack, func() (bool, error) {
		l, err := r.leader()
		next = l
		return l != "" && l != victim.node, err
	})
	if err != nil {
		r.failf("%v", err)
	} else {
		r.res.TakeoverTime = Duration(time.Since(at))
	}
	if err := r.settle(); err != nil {
		return err
	}
	if len(held) > 0 { // else its tasks all committed before it died: nothing to rescue
		if err := r.checkRescues(victim.node, at, held); err != nil {
			return err
		}
		if err := r.rescuesLogged(ps, next, victim.node, held); err != nil {
			return err
		}
	}
	return r.deadNodePruned(victim.node, ps)
}

// rescuesLogged fails unless the new leader next logged the rescue of
// each task of held rescued from node (any worker, if the leadership
// moved again since).
func (r *run) rescuesLogged(ps []*proc, next, node string, held []int64) error {
	now, err := r.leader()
	if err != nil {
		return err
	}
	var logs []string
	for _, p := range ps {
		if p.node == next || now != next && p.alive() {
			logs = append(logs, p.stderr.tail(1<<30))
		}
	}
	for _, id := range held {
		t, err := r.drv.Get(r.ctx, id)
		if err != nil {
			return err
		}
		if !rescuedFrom(t, node) {
			continue
		}
		line := fmt.Sprintf("task_id=%d ", id)
		if !slices.ContainsFunc(logs, func(l string) bool {
			return slices.ContainsFunc(strings.Split(l, "\n"), func(s string) bool {
				return strings.Contains(s, "rescued task whose lease expired") && strings.Contains(s, line)
			})
		}) {
			r.failf("task %d was rescued from %s, but the new leader %s did not log it", id, node, next)
		}
	}
	return nil
}

// deadNodePruned fails unless the dead node's row leaves the node list
// once it has been silent for three leases, while every live worker of ps
// stays listed with a fresh heartbeat.
func (r *run) deadNodePruned(dead string, ps []*proc) error {
	var nodes []keel.NodeInfo
	err := r.waitFor("the dead leader's node row to be pruned", 3*r.o.Timing.LeaseTTL+slack, func() (bool, error) {
		var err error
		nodes, err = r.client.Nodes(r.ctx)
		return err == nil && !slices.ContainsFunc(nodes, func(n keel.NodeInfo) bool { return n.Name == dead }), err
	})
	if err != nil {
		r.failf("%v", err)
		return nil
	}
	for _, n := range nodes {
		if age := time.Since(n.HeartbeatAt); age > r.o.Timing.HeartbeatInterval+slack {
			r.failf("node %s: last heartbeat %v ago", n.Name, age.Round(time.Millisecond))
		}
	}
	for _, p := range ps {
		if p.alive() && !slices.ContainsFunc(nodes, func(n keel.NodeInfo) bool { return n.Name == p.node }) {
			r.failf("live worker %s is not in the node list", p.node)
		}
	}
	return nil
}

// cutConnections routes the workers through a local TCP proxy and cuts
// every connection for cutFor, refusing new ones. The workers must
// reconnect on their own and finish the work: every task applied once.
// Recovery is from the end of the cut to the first task finished after
// it.
func cutConnections(r *run) error {
	addr, why := upstream(r.o.DSN)
	if why != "" {
		return skipError{why}
	}
	px, err := startProxy(addr)
	if err != nil {
		return err
	}
	defer px.Close()
	dsn, err := r.sp.via(px.Addr())
	if err != nil {
		return err
	}
	ps, err := r.prepare(dsn)
	if err != nil {
		return err
	}
	n := px.Cut()
	r.o.Log("cut: %d connections cut for %v", n, cutFor)
	time.Sleep(cutFor)
	before, err := r.finished()
	if err != nil {
		return err
	}
	px.Restore()
	restored := time.Now()
	err = r.waitFor("the first task finished after the cut", time.Minute, func() (bool, error) {
		f, err := r.finished()
		return f > before || f == r.res.Tasks, err
	})
	if err != nil {
		r.failf("%v", err)
	} else {
		r.res.RecoveryTime = Duration(time.Since(restored))
	}
	if err := r.settle(); err != nil {
		return err
	}
	for _, p := range ps {
		if !p.alive() {
			r.failf("worker %s exited after the cut: %s", p.node, p.stderr.tail(500))
		}
		if m, _, err := r.rescues(p.node, restored); err == nil {
			r.res.Rescued += m
		}
	}
	if n == 0 {
		r.failf("the cut found no connection to cut")
	}
	return nil
}

// sigterm SIGTERMs a worker while it runs tasks whose handlers take
// longer than its stop deadline. It must exit within the deadline (plus
// slack) and leave no task running under its name: the handlers it
// cancelled are released at once, not left for the lease to expire. Its
// tasks are the run's own type, never Options.Types: a handler that
// outlasts the stop deadline (keel serve's shutdown_timeout, 30s by
// default) may outlast a type's timeout too, and then its tasks time out
// instead of being released.
func sigterm(r *run) error {
	if err := r.enqueue([]string{workType}, 8*r.o.Workers+8, runAtStep); err != nil {
		return err
	}
	var ps []*proc
	for range r.o.Workers {
		p, err := r.startWorker("work", r.o.Timing.StopTimeout+termLonger, "")
		if err != nil {
			return err
		}
		ps = append(ps, p)
	}
	victim, err := r.busyWorker(ps, r.atOnce(2), false)
	if err != nil {
		return err
	}
	at := victim.signal(syscall.SIGTERM)
	if stop := r.o.Timing.StopTimeout; !victim.wait(stop + slack) {
		r.failf("%s still running %v after SIGTERM (stop deadline %v)", victim.node, stop+slack, stop)
		victim.kill()
	}
	r.res.StopTime = Duration(time.Since(at))
	held, err := r.runningOf(victim.node)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		r.failf("%d tasks still running under %s after it stopped, e.g. %v: not released", len(held), victim.node, held[:min(len(held), 5)])
	}
	if _, err := r.startWorker("work", workDelay, ""); err != nil {
		return err
	}
	if err := r.settle(); err != nil {
		return err
	}
	n, _, err := r.rescues(victim.node, at)
	if err != nil {
		return err
	}
	if n > 0 {
		r.failf("%d tasks of the stopped worker waited out their lease instead of being released", n)
	}
	return nil
}

// killInStep runs tasks of three durable steps (keel.Step) on one worker,
// which blocks in step three on each task's first attempt; it is SIGKILLed
// there and another worker takes over. Steps one and two must not run
// again, step three must run once more, and each task must succeed once
// with the result built from the stored steps.
func killInStep(r *run) error {
	if err := r.enqueue([]string{stepsType}, stepTasks, runAtStep); err != nil {
		return err
	}
	first, err := r.startWorker("steps", 0, "")
	if err != nil {
		return err
	}
	steps := func(step string, attempt int) (int, error) {
		var n int
		q := `SELECT count(*) FROM ` + r.sp.table(stepsLedger) + ` WHERE step = ?`
		args := []any{step}
		if attempt > 0 {
			q += ` AND attempt = ?`
			args = append(args, attempt)
		}
		err := r.db.QueryRowContext(r.ctx, r.sp.rebind(q), args...).Scan(&n)
		return n, err
	}
	err = r.waitFor("every task to reach step three", time.Minute, func() (bool, error) {
		n, err := steps("three", 0)
		return n == stepTasks, err
	})
	if err != nil {
		return err
	}
	at := first.kill()
	second, err := r.startWorker("steps", 0, "")
	if err != nil {
		return err
	}
	if err := r.settle(); err != nil {
		return err
	}
	for _, w := range []struct {
		step           string
		attempt, count int
	}{{"one", 0, stepTasks}, {"two", 0, stepTasks}, {"three", 1, stepTasks}, {"three", 2, stepTasks}} {
		n, err := steps(w.step, w.attempt)
		if err != nil {
			return err
		}
		if n != w.count {
			r.failf("step %s ran %d times (attempt %d; 0 is any), want %d: once per task", w.step, n, w.attempt, w.count)
		}
	}
	// Each task: finished by the second worker on attempt 2, after one
	// lease_expired entry of the first; steps one and two stored by
	// attempt 1, three by attempt 2; the result built from them.
	for i, id := range r.ids {
		t, err := r.client.Get(r.ctx, id)
		if err != nil {
			return err
		}
		if t.Attempt != 2 || t.Node != second.node {
			r.failf("task %d: finished on attempt %d by %q, want attempt 2 by %s", id, t.Attempt, t.Node, second.node)
		}
		if len(t.Errors) != 1 || t.Errors[0].Outcome != keel.OutcomeLeaseExpired || t.Errors[0].Node != first.node {
			r.failf("task %d: error history %+v, want one lease_expired entry of %s", id, t.Errors, first.node)
		}
		want := []struct {
			name, result string
			attempt      int
		}{{"one", fmt.Sprint(i + 1), 1}, {"two", fmt.Sprint((i + 1) * 2), 1}, {"three", fmt.Sprint((i+1)*2 + 1), 2}}
		ok := len(t.Steps) == len(want)
		for j := range want {
			ok = ok && t.Steps[j].Name == want[j].name && string(t.Steps[j].Result) == want[j].result && t.Steps[j].Attempt == want[j].attempt
		}
		if !ok {
			r.failf("task %d: steps %+v, want %+v", id, t.Steps, want)
		}
		if string(t.Result) != want[2].result {
			r.failf("task %d: result %s, want %s, built from the stored steps", id, t.Result, want[2].result)
		}
	}
	return r.checkRescues(first.node, at, r.ids)
}

// lockedBy says what holds the locks a stopped worker keeps.
func (r *run) lockedBy() string {
	if r.sp.kind == SQLite {
		return "SQLite's one write lock"
	}
	return "row locks of its open transaction"
}

// logLockWaits logs the server's open transactions, where it tells
// (MariaDB).
func (r *run) logLockWaits() {
	if r.sp.kind != MariaDB {
		return
	}
	rows, err := r.db.QueryContext(r.ctx, `SELECT trx_state, COALESCE(trx_query, ''), trx_rows_locked FROM information_schema.INNODB_TRX`)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var st, q string
		var n int
		if rows.Scan(&st, &q, &n) == nil {
			r.o.Log("open transaction %s (%d rows locked): %s", st, n, q)
		}
	}
}
