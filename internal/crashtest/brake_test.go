package crashtest

import (
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// The brake scenario: worker processes killed while they drain a backlog
// are no evidence against the type's downstream, so the automatic brake,
// with keel's defaults, never opens.

const (
	// brakeWorkers is each process's workers: more than the default brake
	// window, so that a killed process holds more first attempts than the
	// window has room for, and would open the brake if its expired leases
	// were judged as failures.
	brakeWorkers = 32
	// brakeAlertInterval is how often the leader evaluates the alert
	// rules, brake_open among them: short, so an opened brake's alert
	// fires within the drain.
	brakeAlertInterval = 500 * time.Millisecond
)

// newBrakeWorker is newWorker with brakeWorkers workers and a short alert
// interval. Its type keeps keel's default brake.
func newBrakeWorker(b *backend, drv driver.Driver, db *sql.DB, node string, delay time.Duration) (*keel.Client, error) {
	cfg := workerConfig(b, drv, db, node, delay)
	cfg.Queues = map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: brakeWorkers}}
	cfg.Alerts.Interval = brakeAlertInterval
	return keel.NewClient(cfg)
}

// brakeWatch polls the type's brake and the brake_open alerts while a
// scenario runs, and keeps what it saw.
type brakeWatch struct {
	e       *env
	stop    chan struct{}
	stopped sync.Once
	done    chan struct{}
	mu      sync.Mutex
	samples int
	seen    []string // what showed a brake that opened
}

// watchBrakes polls every interval until halt or end is called.
func (e *env) watchBrakes(interval time.Duration) *brakeWatch {
	w := &brakeWatch{e: e, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			w.poll()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// poll reads the brakes and the brake_open alerts once.
func (w *brakeWatch) poll() {
	var seen []string
	brakes, err := w.e.client.Brakes(w.e.ctx)
	if err != nil {
		seen = append(seen, fmt.Sprintf("listing the brakes failed: %v", err))
	}
	for _, b := range brakes {
		if b.State != keel.BrakeClosed || !b.OpenedAt.IsZero() {
			seen = append(seen, fmt.Sprintf("brake %+v", b))
		}
	}
	alerts, err := w.e.client.Alerts(w.e.ctx, keel.AlertFilter{Rule: keel.RuleBrakeOpen})
	if err != nil {
		seen = append(seen, fmt.Sprintf("listing the alerts failed: %v", err))
	}
	for _, a := range alerts {
		seen = append(seen, fmt.Sprintf("alert %+v", *a))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	if len(w.seen) < 10 {
		w.seen = append(w.seen, seen...)
	}
}

// check fails the test at once if a poll saw a brake that opened or a
// brake_open alert.
func (w *brakeWatch) check() {
	w.e.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) > 0 {
		w.e.t.Fatalf("the brake opened (poll %d): %s", w.samples, strings.Join(w.seen, "; "))
	}
}

// halt stops the polling and waits until it stopped; it may be called
// more than once.
func (w *brakeWatch) halt() {
	w.stopped.Do(func() { close(w.stop) })
	<-w.done
}

// end stops the polling, polls a last time and fails the test if any poll
// saw a brake that opened or a brake_open alert; it returns the number of
// polls.
func (w *brakeWatch) end() int {
	w.e.t.Helper()
	w.halt()
	w.poll()
	w.check()
	return w.samples
}

// killedWorkersNoBrake: three worker processes (brakeWorkers workers
// each) drain b.brakeTasks tasks (5,000; 2,000 on SQLite) of one type
// with keel's default brake, topped up by half as many whenever fewer
// than a third are left before a kill; one of them, not the leader, is SIGKILLed
// three times while it runs tasks, and restarted each time. The tasks it
// held are rescued (lease_expired) before the next kill and succeed on
// their next attempt. An expired lease is no evidence against the
// downstream, so the brake never opens: polled every 100ms during the
// drain and read at the end, the type has no brake that ever opened, no
// brake_open alert fired and no process logged a brake change. Every
// task succeeds with its effect applied exactly once, and no attempt
// failed other than by the kills.
func killedWorkersNoBrake(t *testing.T, b *backend) {
	e := setup(t, b)
	const kills = 3
	total := int64(b.brakeTasks)
	const delay = 100 * time.Millisecond
	began := time.Now()
	e.enqueue(int(total))
	workers := map[string]*worker{} // the live ones
	var all []*worker
	start := func(name string) {
		w := e.startWorkerMode("brake", name, delay)
		workers[name] = w
		all = append(all, w)
	}
	for _, n := range []string{"b1", "b2", "b3"} {
		start(n)
	}
	watch := e.watchBrakes(100 * time.Millisecond)
	defer watch.halt()
	e.waitFor("a tenth of the tasks to succeed", 60*time.Second, func() bool {
		watch.check()
		return e.counts()[driver.StateSucceeded] >= total/10
	})
	// The victim is a worker that is not the leader, so the leader's
	// rescuer outlives every kill; it is killed while it runs at least a
	// window's worth of tasks (a kill between its batches would hold
	// none), and restarted under a new name.
	slot := ""
	var victims []string
	maxHeld := 0
	for k := 1; len(victims) < kills; k++ {
		// Each kill lands mid-drain however fast this build drains:
		// without -race the 2,000 tasks of SQLite are gone in about 5s,
		// sooner than three rounds of a kill and its rescues.
		if c := e.counts(); c[driver.StatePending]+c[driver.StateRunning] < total/3 {
			e.enqueue(int(total / 2))
			total += total / 2
		}
		var victim *worker
		e.waitFor("a non-leader worker running at least 20 tasks", 30*time.Second, func() bool {
			watch.check()
			leader := e.leader()
			for n, w := range workers {
				if n != leader && (slot == "" || strings.HasPrefix(n, slot)) && len(e.runningOf(n)) >= keel.DefaultBrakeWindow {
					victim = w
					return true
				}
			}
			return false
		})
		if slot == "" {
			slot = victim.Name
		}
		before := len(e.runningOf(victim.Name))
		e.kill(victim)
		time.Sleep(300 * time.Millisecond) // see internal/chaos killWorker
		held := len(e.runningOf(victim.Name))
		done := e.counts()[driver.StateSucceeded]
		t.Logf("kill %d: killed %s (leader %q) running %d tasks just before, holding %d after; %d of %d succeeded after %v",
			k, victim.Name, e.leader(), before, held, done, total, time.Since(began).Round(time.Millisecond))
		maxHeld = max(maxHeld, held)
		if held > 0 {
			victims = append(victims, victim.Name)
		} else if k == kills+3 {
			t.Fatalf("%d of %d kills left tasks to rescue", len(victims), k)
		}
		delete(workers, victim.Name)
		start(fmt.Sprintf("%s-r%d", slot, k))
		// The next kill waits for this one's rescues, so that the kills
		// are spread over the drain and each is judged on its own.
		e.waitFor(fmt.Sprintf("the tasks %s held to be rescued", victim.Name), leaseTTL+rescueInterval+slack, func() bool {
			watch.check()
			return len(e.runningOf(victim.Name)) == 0
		})
	}

	e.waitFor(fmt.Sprintf("all %d tasks to succeed", total), 90*time.Second, func() bool {
		watch.check()
		return e.counts()[driver.StateSucceeded] == total
	})
	drained := time.Since(began)
	polls := watch.end()
	e.checkExactlyOnce(total)

	// The kills were rescued: every failed attempt is a lease that expired
	// under a killed worker, and each kill left some.
	rescued := map[string]int{}
	n := 0
	for _, r := range e.retried() {
		for _, ae := range r.Errors {
			if ae.Outcome != driver.OutcomeLeaseExpired || !slices.Contains(victims, ae.Node) {
				t.Errorf("task %d: attempt %d failed under %s with %s (%q); only the kills of %v should fail attempts",
					r.ID, ae.Attempt, ae.Node, ae.Outcome, ae.Error, victims)
			}
			rescued[ae.Node]++
			n++
		}
	}
	for _, v := range victims {
		if rescued[v] == 0 {
			t.Errorf("no task killed with %s was rescued", v)
		}
	}
	// Judged as failures, the expired leases of one kill would be enough
	// to open the brake on their own (16 failures in a window of 20).
	if opens := int(math.Ceil(keel.DefaultBrakeThreshold * keel.DefaultBrakeWindow)); maxHeld < opens {
		t.Errorf("no kill held enough tasks to open the brake if their expired leases were failures (at most %d, want %d)", maxHeld, opens)
	}
	for _, w := range all {
		if l := logLines(w.Stderr.String(), "keel: brake"); len(l) > 0 {
			t.Errorf("%s logged a brake change: %s", w.Name, strings.Join(l, "\n"))
		}
	}
	t.Logf("%d kills rescued (lease_expired per killed worker %v, %d in all); the brake never opened in %d polls; all %d tasks succeeded once, %v after the enqueue",
		len(victims), rescued, n, polls, total, drained.Round(time.Millisecond))
}
