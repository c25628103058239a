package drivertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// A retry this process schedules wakes its worker when it is due, however
// long the poll interval: every due time the process knows of is timed,
// not only the earliest one or those due before the next poll. The test
// runs on the real clock: two tasks fail 0.3 s apart with a 5 s backoff
// and a 4 s poll, which used to start them on the second poll, 8 s later.
// The retry is due backoff after the task's run_at, so the wait is
// measured from there: on a loaded machine the first attempt may start a
// second late, and its retry is not later for it.
func testEngineRetryWakesOnTime(t *testing.T, e *env) {
	const backoff = 5 * time.Second
	var mu sync.Mutex
	starts := map[int][]time.Time{}
	c := e.worker(keel.Config{Now: time.Now, PollInterval: 4 * time.Second, BackoffBase: backoff},
		func(ctx context.Context, task *keel.Task[args]) error {
			mu.Lock()
			defer mu.Unlock()
			starts[task.Args.N] = append(starts[task.Args.N], time.Now())
			if task.Attempt == 1 {
				return errors.New("fail once")
			}
			return nil
		})
	first := e.enqueue(c, 1)
	time.Sleep(300 * time.Millisecond)
	second := e.enqueue(c, 2)
	e.waitState(first.ID, driver.StateSucceeded)
	e.waitState(second.ID, driver.StateSucceeded)
	mu.Lock()
	defer mu.Unlock()
	runAt := map[int]time.Time{1: first.RunAt, 2: second.RunAt}
	for n, s := range starts {
		if len(s) != 2 {
			t.Fatalf("task %d ran %d times", n, len(s))
		}
		// A retry keeps its place in line: it is due backoff after the
		// run_at it was claimed at, however late the first attempt
		// started. The bound leaves room for a loaded machine, not for a
		// poll.
		if wait := s[1].Sub(runAt[n]); wait < backoff || wait > backoff+1500*time.Millisecond {
			t.Fatalf("task %d: retry started %v after its run_at (first attempt %v after it), want %v (poll 4s)",
				n, wait, s[0].Sub(runAt[n]), backoff)
		}
	}
}

// Handlers that ignore their ended context are counted, and while
// MaxRunawayHandlers of them run the client claims nothing, instead of
// reusing their slots for unbounded work.
func testEngineRunawayHandlersStopClaims(t *testing.T, e *env) {
	release := make(chan struct{})
	var returned sync.WaitGroup
	returned.Add(2) // tasks 1 and 2 block
	var rec recorder
	c := e.worker(keel.Config{
		Queues:       map[string]keel.QueueConfig{"default": {MaxWorkers: 2}},
		TimeoutGrace: 30 * time.Millisecond, MaxRunawayHandlers: 1,
	}, func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Args.N)
		if task.Args.N <= 2 {
			defer returned.Done()
			<-release // ignores ctx
		}
		return nil
	}, keel.Timeout(20*time.Millisecond), keel.MaxAttempts(1))
	stuck1, stuck2 := e.enqueue(c, 1), e.enqueue(c, 2)
	waitFor(t, "two handlers running", func() bool { return rec.count() == 2 })
	third := e.enqueue(c, 3)
	for _, id := range []int64{stuck1.ID, stuck2.ID} {
		if row := e.waitErrors(id, 1); row.State != driver.StateDead || row.Errors[0].Outcome != driver.OutcomeTimeout {
			t.Fatalf("task %d: %s %+v", id, row.State, row.Errors[0])
		}
	}
	waitFor(t, "two runaway handlers counted", func() bool { return c.RunawayHandlers() == 2 })
	time.Sleep(200 * time.Millisecond) // many polls: the freed slots must stay unused
	if got := e.get(third.ID); got.State != driver.StatePending {
		t.Fatalf("claimed while two handlers ran away: task 3 is %s", got.State)
	}
	close(release)
	returned.Wait()
	waitFor(t, "runaway count back to 0", func() bool { return c.RunawayHandlers() == 0 })
	e.waitState(third.ID, driver.StateSucceeded)
}
