package drivertest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

func testEngineClaimOrder(t *testing.T, e *env) {
	h := keel.NewHandlers()
	var rec recorder
	keel.Handle(h, "dt.task", func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Args.N)
		return nil
	})
	c := e.newClient(keel.Config{Handlers: h, Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 1}}})
	now := e.clock.Now()
	e.enqueue(c, 1)
	e.enqueue(c, 2, keel.Priority(10))
	e.enqueue(c, 3, keel.Priority(10), keel.RunAt(now.Add(-time.Minute)))
	e.enqueue(c, 4, keel.Priority(-5))
	e.enqueue(c, 5)
	e.enqueue(c, 6, keel.RunAt(now.Add(-time.Second)))
	e.startClient(c)
	waitFor(t, "6 tasks run", func() bool { return rec.count() == 6 })
	if got, want := rec.list(), []int{3, 2, 6, 1, 5, 4}; !slices.Equal(got, want) {
		t.Fatalf("run order %v, want %v", got, want)
	}
}

func testEngineScheduled(t *testing.T, e *env) {
	var rec recorder
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Args.N)
		return nil
	})
	t0 := e.clock.Now()
	delayed := e.enqueue(c, 1, keel.Delay(10*time.Minute))
	at := e.enqueue(c, 2, keel.RunAt(t0.Add(5*time.Minute)))
	if !delayed.RunAt.Equal(t0.Add(10*time.Minute)) || !at.RunAt.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("run_at %v and %v", delayed.RunAt, at.RunAt)
	}
	now := e.enqueue(c, 3)
	e.waitState(now.ID, driver.StateSucceeded)
	time.Sleep(50 * time.Millisecond) // several polls with the clock standing still
	if got := rec.list(); !slices.Equal(got, []int{3}) {
		t.Fatalf("ran %v before their time", got)
	}
	e.clock.Advance(5*time.Minute - time.Millisecond)
	time.Sleep(30 * time.Millisecond)
	if got := rec.list(); !slices.Equal(got, []int{3}) {
		t.Fatalf("ran %v 1ms before RunAt", got)
	}
	e.clock.Advance(time.Millisecond)
	e.waitState(at.ID, driver.StateSucceeded)
	if got := e.get(delayed.ID); got.State != driver.StatePending {
		t.Fatalf("delayed task %s at +5m", got.State)
	}
	e.clock.Advance(5 * time.Minute)
	e.waitState(delayed.ID, driver.StateSucceeded)
	if got := rec.list(); !slices.Equal(got, []int{3, 2, 1}) {
		t.Fatalf("ran %v", got)
	}
}

func testEngineConcurrencyLimit(t *testing.T, e *env) {
	var now, peak atomic.Int32
	c := e.worker(keel.Config{Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 3}}},
		func(ctx context.Context, task *keel.Task[args]) error {
			n := now.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
			now.Add(-1)
			return nil
		})
	jobs := make([]keel.TaskSpec, 40)
	for i := range jobs {
		jobs[i] = keel.TaskSpec{Type: "dt.task", Payload: args{N: i}}
	}
	infos, err := c.EnqueueMany(e.ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		e.waitState(info.ID, driver.StateSucceeded)
	}
	if p := peak.Load(); p > 3 || p < 2 {
		t.Fatalf("at most %d handlers ran at once with MaxWorkers 3", p)
	}
}

func testEngineQueues(t *testing.T, e *env) {
	var rec recorder
	handler := func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Args.N)
		return nil
	}
	a := e.worker(keel.Config{}, handler) // serves "default" only
	other := e.enqueue(a, 2, keel.Queue("other"))
	def := e.enqueue(a, 1)
	e.waitState(def.ID, driver.StateSucceeded)
	time.Sleep(30 * time.Millisecond)
	if row := e.get(other.ID); row.State != driver.StatePending || row.Queue != "other" {
		t.Fatalf("a task of a queue the worker does not serve: %s in %q", row.State, row.Queue)
	}
	e.worker(keel.Config{Queues: map[string]keel.QueueConfig{"other": {MaxWorkers: 1}}}, handler)
	e.waitState(other.ID, driver.StateSucceeded)
	if got := rec.list(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("runs %v", got)
	}
}

// testEngineTypeDefaults: options given to Handle are the type's defaults;
// options given to Enqueue override them.
func testEngineTypeDefaults(t *testing.T, e *env) {
	h := keel.NewHandlers()
	keel.Handle(h, "dt.task", func(ctx context.Context, task *keel.Task[args]) error { return nil },
		keel.Queue("typed"), keel.Priority(4), keel.MaxAttempts(9), keel.Timeout(90*time.Second))
	c := e.newClient(keel.Config{Handlers: h, MaxAttempts: 2, Timeout: time.Minute})
	def := e.enqueue(c, 1)
	if def.Queue != "typed" || def.Priority != 4 || def.MaxAttempts != 9 || def.Timeout != 90*time.Second {
		t.Fatalf("type defaults not applied: queue %q priority %d attempts %d timeout %v", def.Queue, def.Priority, def.MaxAttempts, def.Timeout)
	}
	over := e.enqueue(c, 2, keel.Queue("q2"), keel.Priority(-1), keel.MaxAttempts(1), keel.Timeout(time.Second))
	if over.Queue != "q2" || over.Priority != -1 || over.MaxAttempts != 1 || over.Timeout != time.Second {
		t.Fatalf("enqueue options did not override: queue %q priority %d attempts %d timeout %v", over.Queue, over.Priority, over.MaxAttempts, over.Timeout)
	}
	plain := e.newClient(keel.Config{Types: []string{"dt.plain"}, MaxAttempts: 2, Timeout: time.Minute})
	info, err := plain.Enqueue(e.ctx, "dt.plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.Queue != keel.DefaultQueue || info.MaxAttempts != 2 || info.Timeout != time.Minute || info.Priority != 0 || string(info.Payload) != "{}" {
		t.Fatalf("config defaults not applied: %+v", info)
	}
}

// testEngineTwoClients: two clients on one database share the work; each
// task runs exactly once.
func testEngineTwoClients(t *testing.T, e *env) {
	var mu sync.Mutex
	runs := map[int64]int{}
	byNode := map[string]int{}
	handler := func(node string) keel.HandlerFunc[args] {
		return func(ctx context.Context, task *keel.Task[args]) error {
			mu.Lock()
			runs[task.ID]++
			byNode[node]++
			mu.Unlock()
			time.Sleep(time.Millisecond)
			return nil
		}
	}
	a := e.worker(keel.Config{Node: "node-a"}, handler("a"))
	e.worker(keel.Config{Node: "node-b"}, handler("b"))
	const n = 300
	jobs := make([]keel.TaskSpec, n)
	for i := range jobs {
		jobs[i] = keel.TaskSpec{Type: "dt.task", Payload: args{N: i}}
	}
	infos, err := a.EnqueueMany(e.ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every task to succeed", func() bool {
		counts, err := e.drv.Counts(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		byS := byState(counts)
		return len(byS) == 1 && byS[0].State == driver.StateSucceeded && byS[0].Count == n
	})
	mu.Lock()
	defer mu.Unlock()
	for _, info := range infos {
		if runs[info.ID] != 1 {
			t.Fatalf("task %d ran %d times", info.ID, runs[info.ID])
		}
	}
	t.Logf("runs by node: %v", byNode)
}
