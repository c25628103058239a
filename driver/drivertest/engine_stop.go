package drivertest

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

func testEngineStopForced(t *testing.T, e *env) {
	var running atomic.Int32
	c := e.worker(keel.Config{BackoffBase: time.Minute}, func(ctx context.Context, task *keel.Task[args]) error {
		if task.Attempt == 1 && task.Args.N%2 == 1 {
			return errors.New("first attempt fails") // odd tasks come back with attempt 1 used
		}
		running.Add(1)
		<-ctx.Done()
		return ctx.Err()
	})
	var infos []*keel.TaskInfo
	for n := range 4 {
		infos = append(infos, e.enqueue(c, n))
	}
	waitFor(t, "odd tasks failed once", func() bool {
		return len(e.get(infos[1].ID).Errors) == 1 && len(e.get(infos[3].ID).Errors) == 1
	})
	e.clock.Advance(time.Minute)
	waitFor(t, "4 handlers blocked", func() bool { return running.Load() == 4 })
	before := map[int64]*driver.TaskRow{}
	for _, info := range infos {
		before[info.ID] = e.get(info.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Fatalf("Stop took %v with a 50ms deadline", took)
	}
	now := e.clock.Now()
	for i, info := range infos {
		row := e.get(info.ID)
		wantAttempt, wantErrors := 0, 0
		if i%2 == 1 {
			wantAttempt, wantErrors = 1, 1
		}
		if before[info.ID].Attempt != wantAttempt+1 {
			t.Fatalf("task %d ran attempt %d, want %d", i, before[info.ID].Attempt, wantAttempt+1)
		}
		if row.State != driver.StatePending || row.Attempt != wantAttempt || len(row.Errors) != wantErrors || row.RunAt.After(now) || row.LeaseOwner != "" {
			t.Fatalf("task %d after a forced stop: %s attempt %d (want %d) errors %d (want %d) run_at %v owner %q",
				i, row.State, row.Attempt, wantAttempt, len(row.Errors), wantErrors, row.RunAt, row.LeaseOwner)
		}
	}
	// Released tasks run at once elsewhere, with their attempt refunded.
	var rec recorder
	e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Attempt)
		return nil
	})
	for _, info := range infos {
		e.waitState(info.ID, driver.StateSucceeded)
	}
	got := rec.list()
	slices.Sort(got)
	if !slices.Equal(got, []int{1, 1, 2, 2}) {
		t.Fatalf("attempts of the released tasks' next run: %v, want [1 1 2 2]", got)
	}
}

func testEngineStopGraceful(t *testing.T, e *env) {
	var running atomic.Int32
	release := make(chan struct{})
	var rec recorder
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Args.N)
		running.Add(1)
		select {
		case <-release:
			return task.SetResult("finished")
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	var infos []*keel.TaskInfo
	for n := range 3 {
		infos = append(infos, e.enqueue(c, n))
	}
	waitFor(t, "3 handlers running", func() bool { return running.Load() == 3 })
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopped <- c.Stop(ctx)
	}()
	time.Sleep(100 * time.Millisecond) // Stop has stopped claiming by now
	late := e.enqueue(c, 99)
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while handlers were still running", err)
	default:
	}
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, info := range infos {
		if row := e.get(info.ID); row.State != driver.StateSucceeded || !jsonEqual(row.Result, []byte(`"finished"`)) || len(row.Errors) != 0 {
			t.Fatalf("task %d after a graceful stop: %s result %s errors %+v", info.ID, row.State, row.Result, row.Errors)
		}
	}
	if row := e.get(late.ID); row.State != driver.StatePending || row.Attempt != 0 || slices.Contains(rec.list(), 99) {
		t.Fatalf("a stopping worker claimed a new task: %s attempt %d", row.State, row.Attempt)
	}
}

// testEngineStopIgnored: a handler that ignores its cancelled context
// holds Stop up for TimeoutGrace at most; its task is released all the same
// and its late return changes nothing.
func testEngineStopIgnored(t *testing.T, e *env) {
	started := make(chan struct{})
	release := make(chan struct{})
	returned := make(chan struct{})
	c := e.worker(keel.Config{TimeoutGrace: 100 * time.Millisecond}, func(ctx context.Context, task *keel.Task[args]) error {
		close(started)
		defer close(returned)
		<-release
		return task.SetResult("late")
	})
	info := e.enqueue(c, 1)
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Fatalf("Stop took %v with a 20ms deadline and a 100ms grace", took)
	}
	check := func(when string) {
		t.Helper()
		if row := e.get(info.ID); row.State != driver.StatePending || row.Attempt != 0 || len(row.Errors) != 0 || row.Result != nil {
			t.Fatalf("%s: %s attempt %d errors %+v result %s", when, row.State, row.Attempt, row.Errors, row.Result)
		}
	}
	check("after Stop")
	close(release)
	<-returned
	time.Sleep(20 * time.Millisecond)
	check("after the handler's late return")
}
