package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

func testEngineSucceed(t *testing.T, e *env) {
	var seen atomic.Pointer[keel.Task[args]]
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		seen.Store(task)
		return task.SetResult(map[string]int{"double": task.Args.N * 2})
	})
	info := e.enqueue(c, 21, keel.Meta(map[string]string{"tenant": "t1"}))
	if info.State != keel.StatePending || info.Duplicate || info.Attempt != 0 {
		t.Fatalf("enqueued: %+v", info)
	}
	e.waitState(info.ID, driver.StateSucceeded)
	got, err := c.Get(e.ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.Now()
	switch {
	case !jsonEqual(got.Result, []byte(`{"double":42}`)):
		t.Fatalf("result %s", got.Result)
	case got.Attempt != 1 || len(got.Errors) != 0:
		t.Fatalf("attempt %d errors %v", got.Attempt, got.Errors)
	case !got.StartedAt.Equal(now) || !got.FinishedAt.Equal(now) || !got.AttemptedAt.Equal(now) || !got.CreatedAt.Equal(now):
		t.Fatalf("timestamps: %+v", got)
	case !jsonEqual(got.Meta, []byte(`{"tenant":"t1"}`)):
		t.Fatalf("meta %s", got.Meta)
	}
	task := seen.Load()
	if task.ID != info.ID || task.Args.N != 21 || task.Attempt != 1 || task.Type != "dt.task" || task.Queue != keel.DefaultQueue {
		t.Fatalf("handler saw %+v", task)
	}
}

func testEngineRetryBackoffThenDead(t *testing.T, e *env) {
	c := e.worker(keel.Config{BackoffBase: time.Minute, BackoffMax: time.Hour}, func(ctx context.Context, task *keel.Task[args]) error {
		return fmt.Errorf("boom %d", task.Attempt)
	})
	t0 := e.clock.Now()
	info := e.enqueue(c, 1, keel.MaxAttempts(3))
	row := e.waitErrors(info.ID, 1)
	if row.State != driver.StatePending || row.Attempt != 1 || !row.RunAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after attempt 1: %s attempt %d run_at +%v, want pending 1 +1m", row.State, row.Attempt, row.RunAt.Sub(t0))
	}
	checkAttemptError(t, row.Errors[0], driver.AttemptError{Attempt: 1, Node: c.Node(), Start: t0, End: t0, Outcome: driver.OutcomeError, Error: "boom 1"})

	// Not before its run_at: a short real wait with the clock standing still.
	time.Sleep(50 * time.Millisecond)
	if r := e.get(info.ID); r.Attempt != 1 {
		t.Fatalf("retried before the backoff elapsed: attempt %d", r.Attempt)
	}
	t1 := e.clock.Advance(time.Minute)
	row = e.waitErrors(info.ID, 2)
	if row.State != driver.StatePending || row.Attempt != 2 || !row.RunAt.Equal(t1.Add(2*time.Minute)) {
		t.Fatalf("after attempt 2: %s attempt %d run_at %v, want %v (base × 2)", row.State, row.Attempt, row.RunAt, t1.Add(2*time.Minute))
	}
	checkAttemptError(t, row.Errors[1], driver.AttemptError{Attempt: 2, Node: c.Node(), Start: t1, End: t1, Outcome: driver.OutcomeError, Error: "boom 2"})
	t2 := e.clock.Advance(2 * time.Minute)
	row = e.waitErrors(info.ID, 3)
	if row.State != driver.StateDead || row.Attempt != 3 || !row.FinishedAt.Equal(t2) {
		t.Fatalf("after attempt 3 of 3: %s attempt %d finished %v", row.State, row.Attempt, row.FinishedAt)
	}
	checkAttemptError(t, row.Errors[2], driver.AttemptError{Attempt: 3, Node: c.Node(), Start: t2, End: t2, Outcome: driver.OutcomeError, Error: "boom 3"})
}

func testEngineTypeBackoff(t *testing.T, e *env) {
	c := e.worker(keel.Config{BackoffBase: time.Minute}, func(ctx context.Context, task *keel.Task[args]) error {
		return errors.New("no")
	}, keel.Backoff(10*time.Second, 15*time.Second))
	t0 := e.clock.Now()
	info := e.enqueue(c, 1)
	if row := e.waitErrors(info.ID, 1); !row.RunAt.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("retry at +%v, want the type's base 10s", row.RunAt.Sub(t0))
	}
	t1 := e.clock.Advance(10 * time.Second)
	if row := e.waitErrors(info.ID, 2); !row.RunAt.Equal(t1.Add(15 * time.Second)) {
		t.Fatalf("retry at +%v, want the type's cap 15s", row.RunAt.Sub(t1))
	}
}

func testEnginePermanent(t *testing.T, e *env) {
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		return keel.Permanent(errors.New("card declined"))
	})
	info := e.enqueue(c, 1, keel.MaxAttempts(5))
	row := e.waitErrors(info.ID, 1)
	if row.State != driver.StateDead || row.Attempt != 1 || row.FinishedAt.IsZero() {
		t.Fatalf("permanent error: %s attempt %d", row.State, row.Attempt)
	}
	if ae := row.Errors[0]; ae.Outcome != driver.OutcomePermanent || !strings.Contains(ae.Error, "card declined") {
		t.Fatalf("error entry %+v", ae)
	}
}

func testEngineUndecodable(t *testing.T, e *env) {
	var calls atomic.Int32
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		calls.Add(1)
		return nil
	})
	info, err := c.Enqueue(e.ctx, "dt.task", map[string]string{"n": "not a number"}, keel.MaxAttempts(5))
	if err != nil {
		t.Fatal(err)
	}
	row := e.waitErrors(info.ID, 1)
	if row.State != driver.StateDead || row.Errors[0].Outcome != driver.OutcomePermanent || calls.Load() != 0 {
		t.Fatalf("payload that does not decode: %s %+v, handler calls %d", row.State, row.Errors, calls.Load())
	}
}

func testEngineRetryAfter(t *testing.T, e *env) {
	c := e.worker(keel.Config{BackoffBase: time.Minute}, func(ctx context.Context, task *keel.Task[args]) error {
		return keel.RetryAfter(errors.New("rate limited"), 7*time.Minute)
	})
	t0 := e.clock.Now()
	info := e.enqueue(c, 1, keel.MaxAttempts(2))
	row := e.waitErrors(info.ID, 1)
	if row.State != driver.StatePending || !row.RunAt.Equal(t0.Add(7*time.Minute)) {
		t.Fatalf("RetryAfter 7m: %s run_at +%v", row.State, row.RunAt.Sub(t0))
	}
	if ae := row.Errors[0]; ae.Outcome != driver.OutcomeError || ae.Error != "rate limited" || ae.Attempt != 1 {
		t.Fatalf("error entry %+v", ae)
	}
	e.clock.Advance(7 * time.Minute)
	if row := e.waitErrors(info.ID, 2); row.State != driver.StateDead {
		t.Fatalf("RetryAfter on the last attempt: %s, want dead", row.State)
	}
}

func testEngineSnooze(t *testing.T, e *env) {
	var attempts []int
	var mu sync.Mutex
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		mu.Lock()
		attempts = append(attempts, task.Attempt)
		n := len(attempts)
		mu.Unlock()
		if n <= 2 {
			return keel.Snooze(5 * time.Minute)
		}
		return nil
	})
	t0 := e.clock.Now()
	info := e.enqueue(c, 1, keel.MaxAttempts(1)) // snoozes must not use it up
	row := e.waitTask(info.ID, "snoozed", func(r *driver.TaskRow) bool { return r.State == driver.StatePending && !r.AttemptedAt.IsZero() })
	if row.Attempt != 0 || len(row.Errors) != 0 || !row.RunAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("snoozed: attempt %d errors %d run_at +%v", row.Attempt, len(row.Errors), row.RunAt.Sub(t0))
	}
	t1 := e.clock.Advance(5 * time.Minute)
	row = e.waitTask(info.ID, "snoozed twice", func(r *driver.TaskRow) bool {
		return r.State == driver.StatePending && r.AttemptedAt.Equal(t1)
	})
	if row.Attempt != 0 || len(row.Errors) != 0 {
		t.Fatalf("snoozed twice: attempt %d errors %d", row.Attempt, len(row.Errors))
	}
	e.clock.Advance(5 * time.Minute)
	row = e.waitState(info.ID, driver.StateSucceeded)
	mu.Lock()
	defer mu.Unlock()
	if row.Attempt != 1 || len(row.Errors) != 0 || !slices.Equal(attempts, []int{1, 1, 1}) {
		t.Fatalf("after snoozes: attempt %d errors %d, handler saw attempts %v", row.Attempt, len(row.Errors), attempts)
	}
}

func testEngineTimeout(t *testing.T, e *env) {
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		<-ctx.Done()
		return ctx.Err()
	})
	info := e.enqueue(c, 1, keel.Timeout(30*time.Millisecond), keel.MaxAttempts(2))
	row := e.waitErrors(info.ID, 1)
	if row.State != driver.StatePending || row.Errors[0].Outcome != driver.OutcomeTimeout || !strings.Contains(row.Errors[0].Error, "timeout") {
		t.Fatalf("timed out attempt: %s %+v", row.State, row.Errors[0])
	}
	e.clock.Advance(time.Hour)
	if row := e.waitErrors(info.ID, 2); row.State != driver.StateDead || row.Errors[1].Outcome != driver.OutcomeTimeout {
		t.Fatalf("second timeout: %s %+v", row.State, row.Errors[1])
	}
}

func testEngineTimeoutIgnored(t *testing.T, e *env) {
	release := make(chan struct{})
	returned := make(chan struct{})
	c := e.worker(keel.Config{TimeoutGrace: 50 * time.Millisecond}, func(ctx context.Context, task *keel.Task[args]) error {
		defer close(returned)
		<-release // ignores ctx
		return nil
	})
	info := e.enqueue(c, 1, keel.Timeout(20*time.Millisecond), keel.MaxAttempts(1))
	row := e.waitErrors(info.ID, 1)
	close(release)
	<-returned
	if row.State != driver.StateDead || row.Errors[0].Outcome != driver.OutcomeTimeout {
		t.Fatalf("handler stuck past timeout and grace: %s %+v", row.State, row.Errors[0])
	}
	e.stop(c)
	if got := e.get(info.ID); got.State != driver.StateDead || got.Result != nil {
		t.Fatalf("the late return of a timed-out handler changed the task: %s", got.State)
	}
}

func testEnginePanic(t *testing.T, e *env) {
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		panic("kaboom")
	})
	info := e.enqueue(c, 1, keel.MaxAttempts(1))
	row := e.waitErrors(info.ID, 1)
	ae := row.Errors[0]
	if row.State != driver.StateDead || ae.Outcome != driver.OutcomePanic || !strings.Contains(ae.Error, "kaboom") {
		t.Fatalf("panic: %s %+v", row.State, ae)
	}
	if !strings.Contains(ae.Stack, "goroutine") || !strings.Contains(ae.Stack, "drivertest.testEnginePanic") {
		t.Fatalf("panic stack does not show the handler:\n%s", ae.Stack)
	}
	// The worker survived: it still runs tasks.
	c2 := e.enqueue(c, 2, keel.MaxAttempts(1))
	if row := e.waitErrors(c2.ID, 1); row.Errors[0].Outcome != driver.OutcomePanic {
		t.Fatalf("second panic: %+v", row.Errors[0])
	}
}

func testEngineErrorHistory(t *testing.T, e *env) {
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		return keel.RetryAfter(fmt.Errorf("fail %d", task.Attempt), 0)
	})
	info := e.enqueue(c, 1, keel.MaxAttempts(25))
	row := e.waitState(info.ID, driver.StateDead)
	if row.Attempt != 25 || len(row.Errors) != driver.MaxErrorHistory {
		t.Fatalf("dead after %d attempts with %d errors kept, want 25 and %d", row.Attempt, len(row.Errors), driver.MaxErrorHistory)
	}
	for i, ae := range row.Errors {
		if want := 6 + i; ae.Attempt != want || ae.Error != fmt.Sprintf("fail %d", want) {
			t.Fatalf("error %d: attempt %d %q, want attempt %d", i, ae.Attempt, ae.Error, want)
		}
	}
}
