package crashtest

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/proctest"
)

// stepsType is the task type of the killedInStep scenario.
const stepsType = "crash.steps"

// stepEffectsDDL is the side-effect table the steps handler writes: one
// row per execution of a step. Plain SQL every database takes.
const stepEffectsDDL = `CREATE TABLE step_effects (task_id BIGINT NOT NULL, step VARCHAR(20) NOT NULL, attempt INT NOT NULL)`

// newStepsWorker returns a client whose handler runs three durable steps;
// each records its execution in step_effects before it returns. Step
// three, on the task's first attempt, then blocks until the process is
// killed: the test waits for its row, then SIGKILLs the worker.
func newStepsWorker(b *backend, drv driver.Driver, db *sql.DB, node string) (*keel.Client, error) {
	insert := b.rebind(`INSERT INTO step_effects (task_id, step, attempt) VALUES (?, ?, ?)`)
	h := keel.NewHandlers()
	keel.Handle(h, stepsType, func(ctx context.Context, task *keel.Task[job]) error {
		effect := func(step string) error {
			_, err := db.ExecContext(ctx, insert, task.ID, step, task.Attempt)
			return err
		}
		one, err := keel.Step(ctx, "one", func(ctx context.Context) (int, error) { return task.Args.N + 1, effect("one") })
		if err != nil {
			return err
		}
		two, err := keel.Step(ctx, "two", func(ctx context.Context) (int, error) { return one * 2, effect("two") })
		if err != nil {
			return err
		}
		three, err := keel.Step(ctx, "three", func(ctx context.Context) (int, error) {
			if err := effect("three"); err != nil {
				return 0, err
			}
			if task.Attempt == 1 {
				<-ctx.Done() // the test kills the process here
				return 0, ctx.Err()
			}
			return two + 1, nil
		})
		if err != nil {
			return err
		}
		return task.SetResult(three)
	})
	return keel.NewClient(keel.Config{
		Driver: drv, Handlers: h, Node: node,
		Queues:   map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 2}},
		LeaseTTL: leaseTTL, HeartbeatInterval: heartbeatInterval, RescueInterval: rescueInterval,
		PollInterval: pollInterval, BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		BackoffJitter: -1, MaxAttempts: 5, Timeout: time.Minute, TimeoutGrace: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
}

// killedInStep: a handler with three durable steps whose worker process
// is SIGKILLed during step 3. Another worker process rescues the task once
// its lease expired; steps 1 and 2 do not run again (their side effects,
// counted in step_effects, happened once), step 3 runs a second time, the
// task succeeds with the result built from the stored steps, and Get
// shows the three steps (1 and 2 stored by attempt 1, 3 by attempt 2).
func killedInStep(t *testing.T, b *backend) {
	e := setup(t, b)
	if _, err := e.db.ExecContext(e.ctx, stepEffectsDDL); err != nil {
		t.Fatalf("create step_effects: %v", err)
	}
	c, err := keel.NewClient(keel.Config{Driver: e.drv, Types: []string{stepsType}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Enqueue(e.ctx, stepsType, job{N: 20})
	if err != nil {
		t.Fatal(err)
	}
	effects := func(step string) int64 {
		return e.count(`SELECT count(*) FROM step_effects WHERE task_id = ? AND step = ?`, info.ID, step)
	}
	w1 := proctest.Start(t, "s1", e.helperCmd("steps", "s1", 0))
	e.waitFor("the first worker to reach step three", 60*time.Second, func() bool { return effects("three") == 1 })
	r, err := c.Get(e.ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != keel.StateRunning || r.Node != "s1" || len(r.Steps) != 2 {
		t.Fatalf("in step three: state %s on %q with steps %+v, want running on s1 with two steps", r.State, r.Node, r.Steps)
	}
	e.kill(w1)
	e.startWorkerCmd("s2", e.helperCmd("steps", "s2", 0))
	e.waitFor("the task to succeed on the second worker", 60*time.Second, func() bool {
		r, err := c.Get(e.ctx, info.ID)
		return err == nil && r.State == keel.StateSucceeded
	})
	if one, two, three := effects("one"), effects("two"), effects("three"); one != 1 || two != 1 || three != 2 {
		t.Fatalf("step executions one %d, two %d, three %d; want 1, 1, 2", one, two, three)
	}
	if n := e.count(`SELECT count(*) FROM step_effects WHERE task_id = ? AND step = 'three' AND attempt = 2`, info.ID); n != 1 {
		t.Fatalf("step three ran %d times on attempt 2, want 1", n)
	}
	r, err = c.Get(e.ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Attempt != 2 || r.Node != "s2" || string(r.Result) != "43" {
		t.Fatalf("succeeded task: attempt %d on %q with result %s, want attempt 2 on s2 with 43 ((20+1)*2+1)", r.Attempt, r.Node, r.Result)
	}
	if len(r.Errors) != 1 || r.Errors[0].Outcome != driver.OutcomeLeaseExpired || r.Errors[0].Node != "s1" {
		t.Fatalf("error history %+v, want one lease_expired entry of s1", r.Errors)
	}
	want := []struct {
		name    string
		result  string
		attempt int
	}{{"one", "21", 1}, {"two", "42", 1}, {"three", "43", 2}}
	if len(r.Steps) != len(want) {
		t.Fatalf("steps %+v, want 3", r.Steps)
	}
	for i, w := range want {
		if s := r.Steps[i]; s.Name != w.name || string(s.Result) != w.result || s.Attempt != w.attempt {
			t.Fatalf("step %d = {%s %s attempt %d}, want {%s %s attempt %d}", i, s.Name, s.Result, s.Attempt, w.name, w.result, w.attempt)
		}
	}
	e.checkCounters("at the end")
}

// startWorkerCmd starts a helper process running cmd and waits until it
// runs.
func (e *env) startWorkerCmd(node string, cmd *exec.Cmd) *worker {
	e.t.Helper()
	return proctest.Start(e.t, node, cmd)
}
