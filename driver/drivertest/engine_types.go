package drivertest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// testEngineStoredDefaults: a type's defaults declared by the client that
// handles it (Handle options, stored at Start) or declares it (Declare,
// stored before its first enqueue) apply to enqueues from every client:
// an enqueue-only client (Config.Types) and an AnyType client. An Enqueue
// option still wins, and the stored defaults win over the enqueuing
// client's Config.
func testEngineStoredDefaults(t *testing.T, e *env) {
	ran := make(chan int64, 10)
	e.worker(keel.Config{Queues: map[string]keel.QueueConfig{"q2": {}}}, func(ctx context.Context, task *keel.Task[args]) error {
		ran <- task.ID
		return nil
	}, keel.Queue("q2"), keel.Priority(3), keel.MaxAttempts(9), keel.Timeout(90*time.Second))

	enq := e.newClient(keel.Config{Types: []string{"dt.task", "dt.other"}, MaxAttempts: 2, Timeout: time.Minute})
	info := e.enqueue(enq, 1)
	if info.Queue != "q2" || info.Priority != 3 || info.MaxAttempts != 9 || info.Timeout != 90*time.Second {
		t.Fatalf("enqueue-only client: queue %q priority %d max attempts %d timeout %v, want the declared q2, 3, 9, 1m30s",
			info.Queue, info.Priority, info.MaxAttempts, info.Timeout)
	}
	if row := e.get(info.ID); row.Queue != "q2" || row.Priority != 3 || row.MaxAttempts != 9 || row.Timeout != 90*time.Second {
		t.Fatalf("stored task: %+v", row)
	}
	select {
	case id := <-ran:
		if id != info.ID {
			t.Fatalf("ran %d, want %d", id, info.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the task on the declared queue did not run")
	}
	over := e.enqueue(enq, 2, keel.Priority(-1), keel.MaxAttempts(1))
	if over.Queue != "q2" || over.Priority != -1 || over.MaxAttempts != 1 || over.Timeout != 90*time.Second {
		t.Fatalf("enqueue options over stored defaults: %+v", over)
	}

	any := e.newClient(keel.Config{AnyType: true})
	ai, err := any.Enqueue(e.ctx, "dt.task", args{N: 3})
	if err != nil {
		t.Fatal(err)
	}
	if ai.Queue != "q2" || ai.Priority != 3 || ai.MaxAttempts != 9 {
		t.Fatalf("AnyType client: %+v", ai)
	}

	// Declare: stored before the declaring client's first enqueue.
	h := keel.NewHandlers()
	keel.Declare(h, "dt.other", keel.Queue("q3"), keel.Timeout(2*time.Minute))
	decl := e.newClient(keel.Config{Handlers: h})
	if _, err := decl.Enqueue(e.ctx, "dt.other", args{N: 4}); err != nil {
		t.Fatal(err)
	}
	oi, err := enq.Enqueue(e.ctx, "dt.other", args{N: 5})
	if err != nil {
		t.Fatal(err)
	}
	if oi.Queue != "q3" || oi.Timeout != 2*time.Minute || oi.MaxAttempts != 2 || oi.Priority != 0 {
		t.Fatalf("declared type from an enqueue-only client: %+v, want queue q3, timeout 2m, the client's max attempts 2", oi)
	}
	stored, err := e.drv.ListTypes(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 || stored[0].Name != "dt.other" || stored[1].Name != "dt.task" || stored[1].Queue != "q2" {
		t.Fatalf("stored declarations: %+v", stored)
	}
}

// testEngineDeclaredNotClaimed: a worker serving the queue of a type it
// only declared never claims that type's tasks, not even first in line;
// another type on the same queue runs.
func testEngineDeclaredNotClaimed(t *testing.T, e *env) {
	h := keel.NewHandlers()
	ran := make(chan int64, 10)
	keel.Handle(h, "dt.task", func(ctx context.Context, task *keel.Task[args]) error {
		ran <- task.ID
		return nil
	})
	keel.Declare(h, "dt.other", keel.Priority(10))
	c := e.newClient(keel.Config{Handlers: h})
	declared, err := c.Enqueue(e.ctx, "dt.other", args{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	handled := e.enqueue(c, 2)
	e.startClient(c)
	select {
	case id := <-ran:
		if id != handled.ID {
			t.Fatalf("ran %d, want %d", id, handled.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handled task did not run")
	}
	e.waitState(handled.ID, driver.StateSucceeded)
	time.Sleep(50 * time.Millisecond) // a few polls
	if r := e.get(declared.ID); r.State != driver.StatePending || r.Attempt != 0 || r.Fence != 0 || len(r.Errors) != 0 {
		t.Fatalf("declared-only task was claimed: state %s attempt %d fence %d errors %+v", r.State, r.Attempt, r.Fence, r.Errors)
	}
}

// testEngineMaxSnoozes: a handler that always snoozes is dead-lettered
// with outcome snoozed on the snooze after MaxSnoozes.
func testEngineMaxSnoozes(t *testing.T, e *env) {
	var calls atomic.Int32
	c := e.worker(keel.Config{MaxSnoozes: 3, Now: time.Now}, func(ctx context.Context, task *keel.Task[args]) error {
		if int(calls.Add(1)) != task.Snoozes+1 {
			t.Errorf("call %d sees %d snoozes", calls.Load(), task.Snoozes)
		}
		return keel.Snooze(time.Millisecond)
	})
	info := e.enqueue(c, 1)
	row := e.waitState(info.ID, driver.StateDead)
	if n := calls.Load(); n != 4 {
		t.Fatalf("handler ran %d times, want 4 (3 snoozes and the one past the maximum)", n)
	}
	if row.Snoozes != 3 || row.Attempt != 1 || len(row.Errors) != 1 {
		t.Fatalf("dead task: snoozes %d attempt %d errors %+v", row.Snoozes, row.Attempt, row.Errors)
	}
	ae := row.Errors[0]
	if ae.Outcome != driver.OutcomeSnoozed || !strings.Contains(ae.Error, "3 snoozes") || ae.Attempt != 1 {
		t.Fatalf("error %+v, want outcome snoozed naming 3 snoozes", ae)
	}
	got, err := c.Get(e.ctx, info.ID)
	if err != nil || got.Snoozes != 3 {
		t.Fatalf("Get: snoozes %v, %v", got, err)
	}
}
