package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/proctest"
)

// The dead-letter fallback scenario: tasks that always fail, with on_dead
// follow-ups, and a worker SIGKILLed again and again while they die.

const (
	failType     = "crash.fail"
	failedType   = "crash.failed"
	fallbackName = "fallback" // the follow-ups' queue, which no worker works
)

// newFailWorker returns a client whose handler for failType fails after
// delay, so that every task dies after its last attempt, with a follow-up
// of failedType.
func newFailWorker(drv driver.Driver, node string, delay time.Duration) (*keel.Client, error) {
	h := keel.NewHandlers()
	keel.Handle(h, failType, func(ctx context.Context, task *keel.Task[job]) error {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		return fmt.Errorf("task %d fails on purpose", task.Args.N)
	}, keel.OnDead(failedType), keel.NoBrake()) // it always fails: the automatic brake would pause it
	keel.Declare(h, failedType, keel.Queue(fallbackName))
	return keel.NewClient(keel.Config{
		Driver: drv, Handlers: h, Node: node,
		Queues:   map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: maxWorkers}},
		LeaseTTL: leaseTTL, HeartbeatInterval: heartbeatInterval, RescueInterval: rescueInterval,
		PollInterval: pollInterval, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		BackoffJitter: -1, Timeout: 30 * time.Second, TimeoutGrace: time.Second,
		Alerts: keel.AlertConfig{Off: true},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
}

// deadFollowUps: total tasks that always fail (max attempts 1 or 2) are
// worked by one worker process at a time, SIGKILLed every few hundred
// milliseconds and restarted, so that some tasks are dead-lettered by the
// worker's completion and some, held by a killed worker on their last
// attempt, by the rescuer. In the end every task is dead and has exactly
// one follow-up task, carrying its id, type and last error, and no
// follow-up belongs to no dead task.
func deadFollowUps(t *testing.T, b *backend) {
	e := setup(t, b)
	h := keel.NewHandlers()
	keel.Declare(h, failType, keel.OnDead(failedType), keel.NoBrake())
	c, err := keel.NewClient(keel.Config{Driver: e.drv, Handlers: h})
	if err != nil {
		t.Fatal(err)
	}
	const total = 1500
	for start := 0; start < total; start += 500 {
		jobs := make([]keel.TaskSpec, 0, 500)
		for i := start; i < start+500; i++ {
			jobs = append(jobs, keel.TaskSpec{Type: failType, Payload: job{N: i}, Options: []keel.Option{keel.MaxAttempts(1 + i%2)}})
		}
		if _, err := c.EnqueueMany(e.ctx, jobs); err != nil {
			t.Fatal(err)
		}
	}
	kills := 0
	for try := 0; kills < 6 && try < 20; try++ {
		w := e.startWorkerMode("fail", fmt.Sprintf("f%d", try), 30*time.Millisecond)
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond)
		held := len(e.runningOf(w.Name))
		e.kill(w)
		if held > 0 {
			kills++
		}
		t.Logf("kill %d: %s held %d running tasks; task states %v", try, w.Name, held, e.counts())
		if e.counts()[driver.StateDead] >= total-total/10 {
			break
		}
	}
	e.startWorkerMode("fail", "f-last", 30*time.Millisecond)
	e.waitFor(fmt.Sprintf("all %d tasks to die", total), 120*time.Second, func() bool {
		c := e.counts()
		return c[driver.StateDead] == total && c[driver.StatePending] == total && c[driver.StateRunning] == 0
	})
	e.checkCounters("at the end")

	// Every follow-up: one per dead task, carrying it.
	seen := map[int64]int{}
	var before int64
	byRescuer := 0
	for {
		rows, err := e.drv.List(e.ctx, driver.Filter{Queue: fallbackName, BeforeID: before, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			var d keel.DeadTask
			if err := json.Unmarshal(r.Payload, &d); err != nil {
				t.Fatalf("follow-up %d: payload %s: %v", r.ID, r.Payload, err)
			}
			seen[d.TaskID]++
			dead, err := e.drv.Get(e.ctx, d.TaskID)
			switch {
			case errors.Is(err, driver.ErrNotFound):
				t.Errorf("follow-up %d names task %d, which does not exist", r.ID, d.TaskID)
				continue
			case err != nil:
				t.Fatal(err)
			}
			last := dead.Errors[len(dead.Errors)-1]
			if last.Outcome == driver.OutcomeLeaseExpired {
				byRescuer++
			}
			if r.Type != failedType || dead.State != driver.StateDead || d.Type != failType || d.Error != last.Error || d.Attempt != dead.Attempt {
				t.Errorf("follow-up %d (%s) of task %d (%s, attempt %d, last error %q): %+v", r.ID, r.Type, dead.ID, dead.State, dead.Attempt, last.Error, d)
			}
			before = r.ID
		}
	}
	t.Logf("%d kills; %d tasks dead-lettered by the rescuer", kills, byRescuer)
	if byRescuer == 0 {
		t.Error("no task was dead-lettered by the rescuer: the kills did not land")
	}
	dups := 0
	for _, n := range seen {
		if n != 1 {
			dups++
		}
	}
	if len(seen) != total || dups != 0 {
		t.Fatalf("%d dead tasks have follow-ups (want %d), %d of them more than one", len(seen), total, dups)
	}
}

// startWorkerMode starts a helper process in mode and waits until it runs.
func (e *env) startWorkerMode(mode, node string, delay time.Duration) *worker {
	e.t.Helper()
	return proctest.Start(e.t, node, e.helperCmd(mode, node, delay))
}
