package drivertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// takeOver simulates a worker losing task id for good: its lease expires
// (the clock passes LeaseTTL), the rescuer returns the task to pending and
// the owner "other" claims it. It returns the new attempt's start.
func (e *env) takeOver(id int64, lease time.Duration) time.Time {
	e.t.Helper()
	now := e.clock.Advance(lease + time.Second)
	rows, err := e.rescue(now, 10, time.Hour)
	if err != nil || len(rows) != 1 || rows[0].ID != id {
		e.t.Fatalf("rescue: %v, %v", ids(rows), err)
	}
	at := now.Add(time.Hour) // the clock stays: the stale client must not claim it back
	// The stale client's worker keeps polling: SKIP LOCKED may pass over the
	// row while one of its (empty) claims holds it, so look again briefly.
	var got []driver.TaskRow
	waitFor(e.t, "the rescued task to be claimable", func() bool {
		got = e.claim("other", at, 1)
		return len(got) > 0
	})
	if r := got[0]; r.ID != id || r.Attempt != 2 {
		e.t.Fatalf("take over: claimed %d attempt %d", r.ID, r.Attempt)
	}
	return at
}

func testEngineCompleteTxLeaseLost(t *testing.T, e *env) {
	e.createEffects()
	started := make(chan struct{})
	release := make(chan struct{})
	result := make(chan error, 1)
	c := e.worker(keel.Config{LeaseTTL: time.Minute, HeartbeatInterval: 30 * time.Second}, func(ctx context.Context, task *keel.Task[args]) error {
		close(started)
		<-release
		err := e.applyEffect(ctx, task, "stale", true)
		result <- err
		return err
	})
	info := e.enqueue(c, 1)
	<-started
	at := e.takeOver(info.ID, time.Minute)
	close(release)
	if err := <-result; !errors.Is(err, keel.ErrLeaseLost) {
		t.Fatalf("CompleteTx after a takeover: %v, want ErrLeaseLost", err)
	}
	e.stop(c)
	row := e.get(info.ID)
	if row.State != driver.StateRunning || row.LeaseOwner != "other" || row.Attempt != 2 || row.Result != nil || e.effects(info.ID) != 0 {
		t.Fatalf("stale CompleteTx changed things: %s owner %q attempt %d result %s effects %d",
			row.State, row.LeaseOwner, row.Attempt, row.Result, e.effects(info.ID))
	}
	if len(row.Errors) != 1 || row.Errors[0].Outcome != driver.OutcomeLeaseExpired || row.Errors[0].Node != c.Node() {
		t.Fatalf("errors %+v: want only the lease_expired entry for %s", row.Errors, c.Node())
	}
	if applied := e.finish("other", at, driver.Transition{ID: info.ID, Fence: 2, State: driver.StateSucceeded}); len(applied) != 1 {
		t.Fatal("the new owner could not finish")
	}
}

func testEngineStaleWorker(t *testing.T, e *env) {
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	returned := make(chan struct{})
	// A: one slot, its handler hangs until released, no heartbeat in the
	// test's lifetime; its lease (1m of fake time) expires when the clock
	// moves.
	a := e.worker(keel.Config{
		LeaseTTL: time.Minute, HeartbeatInterval: 30 * time.Second, RescueInterval: 5 * time.Millisecond,
		Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 1}},
	}, func(ctx context.Context, task *keel.Task[args]) error {
		started <- struct{}{}
		<-release
		defer close(returned)
		return task.SetResult("A")
	})
	info := e.enqueue(a, 1)
	<-started
	b := e.worker(keel.Config{LeaseTTL: time.Minute, HeartbeatInterval: 30 * time.Second, RescueInterval: 5 * time.Millisecond},
		func(ctx context.Context, task *keel.Task[args]) error { return task.SetResult("B") })
	e.clock.Advance(time.Minute + time.Second)
	// Whichever client leads rescues the task. It keeps its place in line
	// (due at its old run_at plus the one-minute backoff, which the clock
	// has passed), so B may take it at once.
	row := e.waitTask(info.ID, "rescued", func(r *driver.TaskRow) bool { return len(r.Errors) > 0 })
	if len(row.Errors) != 1 || row.Errors[0].Outcome != driver.OutcomeLeaseExpired || row.Errors[0].Node != a.Node() {
		t.Fatalf("rescued: attempt %d errors %+v", row.Attempt, row.Errors)
	}
	e.clock.Advance(time.Minute) // A's only slot is still busy, so B runs it
	row = e.waitState(info.ID, driver.StateSucceeded)
	close(release)
	<-returned
	e.stop(a)
	e.stop(b)
	row = e.get(info.ID)
	if !jsonEqual(row.Result, []byte(`"B"`)) || row.Attempt != 2 || len(row.Errors) != 1 {
		t.Fatalf("after the stale worker returned: result %s attempt %d errors %d", row.Result, row.Attempt, len(row.Errors))
	}
}

func testEngineHeartbeatLost(t *testing.T, e *env) {
	cause := make(chan error, 1)
	started := make(chan struct{})
	c := e.worker(keel.Config{HeartbeatInterval: 10 * time.Millisecond}, func(ctx context.Context, task *keel.Task[args]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	})
	info := e.enqueue(c, 1)
	<-started
	if _, err := e.drv.Cancel(e.ctx, info.ID, e.clock.Now()); err != nil { // from elsewhere
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, keel.ErrLeaseLost) {
			t.Fatalf("handler cancelled with cause %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat did not cancel the handler of a task it no longer holds")
	}
	e.stop(c)
	row := e.get(info.ID)
	if row.State != driver.StateCancelled || len(row.Errors) != 1 {
		t.Fatalf("after lost lease: %s errors %+v", row.State, row.Errors)
	}
	// The timeline shows the attempt the cancel ended.
	requireCancelledAttempt(t, row, 1, c.Node(), row.AttemptedAt, row.FinishedAt)
}

// testEngineSelfReclaim: a client's attempt hangs (ignoring its context)
// past its lease; the task is rescued and the same client claims it again.
// When the stale attempt finally returns, its outcome is rejected and the
// client must still know the new attempt: Cancel reaches its handler.
func testEngineSelfReclaim(t *testing.T, e *env) {
	release := make(chan struct{})
	firstReturned := make(chan struct{})
	secondStarted := make(chan struct{})
	secondDone := make(chan struct{})
	c := e.worker(keel.Config{
		LeaseTTL: time.Minute, HeartbeatInterval: 30 * time.Second, TimeoutGrace: time.Minute,
		Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 3}},
	}, func(ctx context.Context, task *keel.Task[args]) error {
		switch {
		case task.Args.N != 1:
			return nil
		case task.Attempt == 1:
			defer close(firstReturned)
			<-release // stuck: does not watch ctx
			return task.SetResult("stale")
		default:
			close(secondStarted)
			<-ctx.Done()
			close(secondDone)
			return ctx.Err()
		}
	})
	info := e.enqueue(c, 1)
	e.waitState(info.ID, driver.StateRunning)
	// The lease runs out (say the database was unreachable for the
	// heartbeat) and the rescuer takes the task back, runnable at once.
	now := e.clock.Now()
	rows, err := e.rescue(now.Add(2*time.Minute), 10, -2*time.Minute)
	if err != nil || len(rows) != 1 {
		t.Fatalf("rescue: %v, %v", ids(rows), err)
	}
	select {
	case <-secondStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not claim the rescued task again")
	}
	close(release)
	<-firstReturned
	// A task finished after the stale outcome was handed over: by then the
	// stale attempt's outcome went through the completer too.
	marker := e.enqueue(c, 2)
	e.waitState(marker.ID, driver.StateSucceeded)
	time.Sleep(20 * time.Millisecond)
	if row := e.get(info.ID); row.State != driver.StateRunning || row.Attempt != 2 || row.Result != nil {
		t.Fatalf("the stale attempt's outcome applied: %s attempt %d result %s", row.State, row.Attempt, row.Result)
	}
	if _, err := c.Cancel(e.ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-secondDone:
	case <-time.After(5 * time.Second):
		t.Fatal("Cancel did not reach the running attempt: the stale attempt's end made the client forget it")
	}
}

// failingHeartbeat is a driver whose Heartbeat fails while fail is set, as
// if the database were unreachable for the heartbeat.
type failingHeartbeat struct {
	driver.Driver
	fail atomic.Bool
}

func (f *failingHeartbeat) Heartbeat(ctx context.Context, p driver.HeartbeatParams) ([]int64, error) {
	if f.fail.Load() {
		return nil, errors.New("drivertest: database unreachable")
	}
	return f.Driver.Heartbeat(ctx, p)
}

// testEngineHeartbeatFailing: a worker that cannot renew its leases cancels
// its own handlers before the leases can run out, not later.
func testEngineHeartbeatFailing(t *testing.T, e *env) {
	drv := &failingHeartbeat{Driver: e.drv}
	started := make(chan struct{})
	cause := make(chan error, 1)
	c := e.worker(keel.Config{Driver: drv, LeaseTTL: time.Minute, HeartbeatInterval: 10 * time.Millisecond},
		func(ctx context.Context, task *keel.Task[args]) error {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		})
	e.enqueue(c, 1)
	<-started
	time.Sleep(30 * time.Millisecond) // a few successful beats
	drv.fail.Store(true)
	e.clock.Advance(30 * time.Second) // renewals failing for half the lease: keep going
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-cause:
		t.Fatalf("handler cancelled (%v) while its lease had 30s left", err)
	default:
	}
	e.clock.Advance(30 * time.Second) // now the lease may be gone
	select {
	case err := <-cause:
		if !errors.Is(err, keel.ErrLeaseLost) {
			t.Fatalf("handler cancelled with %v, want ErrLeaseLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handlers kept running although no lease could be renewed for a whole LeaseTTL")
	}
}
