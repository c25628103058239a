package drivertest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

func testEngineCancelPending(t *testing.T, e *env) {
	var rec recorder
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Args.N)
		return nil
	})
	info := e.enqueue(c, 1, keel.Delay(time.Minute))
	got, err := c.Cancel(e.ctx, info.ID)
	if err != nil || got.State != keel.StateCancelled || got.FinishedAt.IsZero() {
		t.Fatalf("cancel pending: %+v, %v", got, err)
	}
	e.clock.Advance(time.Hour)
	marker := e.enqueue(c, 2)
	e.waitState(marker.ID, driver.StateSucceeded)
	if slices.Contains(rec.list(), 1) {
		t.Fatal("a cancelled task ran")
	}
	got, err = c.Retry(e.ctx, info.ID)
	if err != nil || got.State != keel.StatePending || got.Attempt != 0 {
		t.Fatalf("retry cancelled: %+v, %v", got, err)
	}
	if row := e.waitState(info.ID, driver.StateSucceeded); row.Attempt != 1 {
		t.Fatalf("retried task ran with attempt %d", row.Attempt)
	}
}

func testEngineCancelRunning(t *testing.T, e *env) {
	started := make(chan struct{})
	cause := make(chan error, 1)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil))
	c := e.worker(keel.Config{Logger: logger}, func(ctx context.Context, task *keel.Task[args]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	info := e.enqueue(c, 1)
	<-started
	got, err := c.Cancel(e.ctx, info.ID)
	if err != nil || got.State != keel.StateCancelled {
		t.Fatalf("cancel running: %+v, %v", got, err)
	}
	select {
	case <-cause:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler of a cancelled task was not cancelled")
	}
	e.stop(c) // every outcome stored or rejected
	row := e.get(info.ID)
	if row.State != driver.StateCancelled || len(row.Errors) != 1 || row.Attempt != 1 {
		t.Fatalf("cancelled running task after its handler returned: %s errors %+v attempt %d", row.State, row.Errors, row.Attempt)
	}
	requireCancelledAttempt(t, row, 1, c.Node(), row.AttemptedAt, row.FinishedAt)
	// The worker's rejected outcome is expected: it says so at INFO, not
	// as a lost lease at WARN.
	if out := logs.String(); strings.Contains(out, "outcome rejected") || !strings.Contains(out, "task cancelled while running") {
		t.Errorf("the cancelling worker's log:\n%s\nwant \"task cancelled while running\" and no rejected outcome", out)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testEngineCancelElsewhere(t *testing.T, e *env) {
	started := make(chan struct{})
	release := make(chan struct{})
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		close(started)
		<-release // does not watch ctx
		return task.SetResult("done")
	})
	info := e.enqueue(c, 1)
	<-started
	// Another process cancels: only the database knows.
	if _, err := e.drv.Cancel(e.ctx, info.ID, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	close(release)
	e.stop(c)
	row := e.get(info.ID)
	if row.State != driver.StateCancelled || row.Result != nil || len(row.Errors) != 1 {
		t.Fatalf("completion of a task cancelled elsewhere applied: %s result %s errors %+v", row.State, row.Result, row.Errors)
	}
	requireCancelledAttempt(t, row, 1, c.Node(), row.AttemptedAt, row.FinishedAt)
}

func testEngineRetryFromDead(t *testing.T, e *env) {
	var calls atomic.Int32
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		if calls.Add(1) == 1 {
			return keel.Permanent(errors.New("first time"))
		}
		return task.SetResult("second time")
	})
	info := e.enqueue(c, 1)
	e.waitState(info.ID, driver.StateDead)
	got, err := c.Retry(e.ctx, info.ID)
	if err != nil || got.State != keel.StatePending || got.Attempt != 0 || len(got.Errors) != 1 {
		t.Fatalf("retry dead: %+v, %v", got, err)
	}
	row := e.waitState(info.ID, driver.StateSucceeded)
	if row.Attempt != 1 || len(row.Errors) != 1 || !jsonEqual(row.Result, []byte(`"second time"`)) {
		t.Fatalf("after retry: attempt %d errors %d result %s", row.Attempt, len(row.Errors), row.Result)
	}
}

func testEngineWrongState(t *testing.T, e *env) {
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error { return nil })
	info := e.enqueue(c, 1)
	e.waitState(info.ID, driver.StateSucceeded)
	if _, err := c.Cancel(e.ctx, info.ID); !errors.Is(err, keel.ErrWrongState) {
		t.Fatalf("cancel succeeded task: %v", err)
	}
	if _, err := c.Retry(e.ctx, info.ID); !errors.Is(err, keel.ErrWrongState) {
		t.Fatalf("retry succeeded task: %v", err)
	}
	pending := e.enqueue(c, 2, keel.Delay(time.Hour))
	if _, err := c.Retry(e.ctx, pending.ID); !errors.Is(err, keel.ErrWrongState) {
		t.Fatalf("retry pending task: %v", err)
	}
	for name, f := range map[string]func(int64) (*keel.TaskInfo, error){
		"get":    func(id int64) (*keel.TaskInfo, error) { return c.Get(e.ctx, id) },
		"cancel": func(id int64) (*keel.TaskInfo, error) { return c.Cancel(e.ctx, id) },
		"retry":  func(id int64) (*keel.TaskInfo, error) { return c.Retry(e.ctx, id) },
	} {
		if _, err := f(pending.ID + 1000); !errors.Is(err, keel.ErrNotFound) {
			t.Fatalf("%s missing id: %v, want ErrNotFound", name, err)
		}
	}
}

// testEngineCancelRetryReclaim: an attempt is cancelled but its handler
// keeps going; the task is retried at once and the same client claims it
// again. The cancelled attempt's late success must not complete the new
// attempt.
func testEngineCancelRetryReclaim(t *testing.T, e *env) {
	release := make(chan struct{})
	firstReturned := make(chan struct{})
	secondStarted := make(chan struct{})
	var calls atomic.Int32
	c := e.worker(keel.Config{TimeoutGrace: time.Minute, Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 2}}},
		func(ctx context.Context, task *keel.Task[args]) error {
			if calls.Add(1) == 1 {
				defer close(firstReturned)
				<-release // keeps going after its cancellation
				return task.SetResult("cancelled attempt")
			}
			close(secondStarted)
			<-ctx.Done()
			return ctx.Err()
		})
	info := e.enqueue(c, 1)
	e.waitState(info.ID, driver.StateRunning)
	if _, err := c.Cancel(e.ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Retry(e.ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-secondStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the retried task was not claimed")
	}
	close(release)
	<-firstReturned
	time.Sleep(100 * time.Millisecond)
	if row := e.get(info.ID); row.State != driver.StateRunning || row.Result != nil {
		t.Fatalf("the cancelled attempt completed the retried task: %s result %s", row.State, row.Result)
	}
}
