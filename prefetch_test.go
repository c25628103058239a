package keel_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
)

// gatedDriver is SQLite whose plain claims can be held back: while gate
// is set, Claim waits for it to close.
type gatedDriver struct {
	*sqlite.Driver
	mu   sync.Mutex
	gate chan struct{}
}

func (d *gatedDriver) Claim(ctx context.Context, p driver.ClaimParams) ([]driver.TaskRow, error) {
	d.mu.Lock()
	g := d.gate
	d.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return d.Driver.Claim(ctx, p)
}

// hold makes claims wait until the returned func is called.
func (d *gatedDriver) hold() (open func()) {
	g := make(chan struct{})
	d.mu.Lock()
	d.gate = g
	d.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			d.gate = nil
			d.mu.Unlock()
			close(g)
		})
	}
}

// prefetchBundle is a worker client whose handler of "t.work" reports each
// start on started and returns when release gives it a turn (or closes).
type prefetchBundle struct {
	c       *keel.Client
	drv     *gatedDriver
	started chan int64
	release chan struct{}
	done    sync.Once
	runs    sync.Map // task id -> *atomic.Int64, handler runs
}

// releaseAll lets every handler return, now and from now on.
func (b *prefetchBundle) releaseAll() { b.done.Do(func() { close(b.release) }) }

func prefetchSetup(t *testing.T, q keel.QueueConfig, mod ...func(*keel.Config)) *prefetchBundle {
	t.Helper()
	sq, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	b := &prefetchBundle{drv: &gatedDriver{Driver: sq}, started: make(chan int64, 100), release: make(chan struct{})}
	h := keel.NewHandlers()
	keel.Handle(h, "t.work", func(ctx context.Context, task *keel.Task[payload]) error {
		n, _ := b.runs.LoadOrStore(task.ID, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		b.started <- task.ID
		select {
		case <-b.release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	cfg := keel.Config{Driver: b.drv, Handlers: h, Queues: map[string]keel.QueueConfig{"default": q},
		PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	for _, m := range mod {
		m(&cfg)
	}
	b.c, err = keel.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// enqueue enqueues n tasks of "t.work" and returns their ids in order.
func (b *prefetchBundle) enqueue(t *testing.T, n int) []int64 {
	t.Helper()
	var ids []int64
	for i := range n {
		info, err := b.c.Enqueue(context.Background(), "t.work", payload{N: i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	return ids
}

// start starts the workers; the cleanup lets every handler return and
// stops them.
func (b *prefetchBundle) start(t *testing.T) {
	t.Helper()
	if err := b.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.releaseAll()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.c.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
}

// waitStarted returns the ids of the next n handler starts.
func (b *prefetchBundle) waitStarted(t *testing.T, n int) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		select {
		case id := <-b.started:
			ids = append(ids, id)
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d of %d handlers started", len(ids), n)
		}
	}
	return ids
}

// running returns the ids of the tasks running in the database.
func (b *prefetchBundle) running(t *testing.T) []int64 {
	t.Helper()
	list, err := b.c.List(context.Background(), keel.Filter{State: keel.StateRunning})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, ti := range list {
		ids = append(ids, ti.ID)
	}
	slices.Sort(ids)
	return ids
}

// waitRunning waits until n tasks are running in the database.
func (b *prefetchBundle) waitRunning(t *testing.T, n int) []int64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ids := b.running(t)
		if len(ids) == n {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks running in the database, want %d", len(ids), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPrefetchStartsHeldTask: a queue of 2 workers with prefetch 2 holds 2
// tasks claimed beyond its running ones, and a freed slot starts the first
// of them while claims cannot reach the database.
func TestPrefetchStartsHeldTask(t *testing.T) {
	b := prefetchSetup(t, keel.QueueConfig{MaxWorkers: 2, Prefetch: 2})
	b.enqueue(t, 8)
	b.start(t)
	first := b.waitStarted(t, 2)
	held := slices.DeleteFunc(b.waitRunning(t, 4), func(id int64) bool { return slices.Contains(first, id) })
	if len(held) != 2 {
		t.Fatalf("held %v beside the running %v, want 2", held, first)
	}
	time.Sleep(100 * time.Millisecond) // a claim beyond 2 + 2 would show by now
	if ids := b.running(t); len(ids) != 4 {
		t.Fatalf("%d tasks running in the database with 2 workers and prefetch 2, want 4", len(ids))
	}
	open := b.drv.hold()
	defer open()
	b.release <- struct{}{}
	if next := b.waitStarted(t, 1)[0]; next != held[0] {
		t.Fatalf("the freed slot started task %d, want %d (the first held, %v)", next, held[0], held)
	}
	open()
	b.releaseAll()
	waitState(t, b.c, keel.StateSucceeded, 8)
	b.runs.Range(func(id, n any) bool {
		if n.(*atomic.Int64).Load() != 1 {
			t.Errorf("task %d ran %d times", id, n.(*atomic.Int64).Load())
		}
		return true
	})
	qs, err := b.c.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 1 || qs[0].MaxWorkers != 2 || qs[0].Prefetch != 2 {
		t.Fatalf("queues %+v, want default with MaxWorkers 2, Prefetch 2", qs)
	}
}

// waitState waits until n tasks are in state.
func waitState(t *testing.T, c *keel.Client, state keel.State, n int) []*keel.TaskInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		list, err := c.List(context.Background(), keel.Filter{State: state})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == n {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks %s, want %d", len(list), state, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPrefetchOff: with NoPrefetch a queue claims no task beyond its free
// slots.
func TestPrefetchOff(t *testing.T) {
	b := prefetchSetup(t, keel.QueueConfig{MaxWorkers: 2, Prefetch: keel.NoPrefetch})
	b.enqueue(t, 6)
	b.start(t)
	b.waitStarted(t, 2)
	for range 20 {
		if ids := b.running(t); len(ids) != 2 {
			t.Fatalf("%d tasks running in the database with 2 workers and no prefetch, want 2", len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
	qs, err := b.c.Queues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if qs[0].Prefetch != 0 {
		t.Fatalf("queue %+v shows prefetch, want 0", qs[0])
	}
}

// TestPrefetchDefault: a quarter of MaxWorkers, rounded down.
func TestPrefetchDefault(t *testing.T) {
	for workers, want := range map[int]int{0: 2, 3: 0, 4: 1, 10: 2, 1000: 250} {
		c, _ := setup(t, func(c *keel.Config) {
			c.Handlers = keel.NewHandlers()
			keel.Handle(c.Handlers, "t.x", func(context.Context, *keel.Task[payload]) error { return nil })
			c.Queues = map[string]keel.QueueConfig{"q": {MaxWorkers: workers}}
		})
		qs, err := c.Queues(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) != 1 || qs[0].Prefetch != want {
			t.Errorf("MaxWorkers %d: queues %+v, want Prefetch %d", workers, qs, want)
		}
	}
}

// TestPrefetchReleasedOnStop: Stop gives the held tasks back at once,
// their attempts refunded, while the running one finishes.
func TestPrefetchReleasedOnStop(t *testing.T) {
	b := prefetchSetup(t, keel.QueueConfig{MaxWorkers: 1, Prefetch: 2})
	b.enqueue(t, 4)
	if err := b.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	run := b.waitStarted(t, 1)[0]
	held := slices.DeleteFunc(b.waitRunning(t, 3), func(id int64) bool { return id == run })
	stopped := make(chan error, 1)
	go func() { stopped <- b.c.Stop(context.Background()) }()
	if ids := b.waitRunning(t, 1); ids[0] != run {
		t.Fatalf("running %v during the drain, want only %d", ids, run)
	}
	for _, id := range held {
		ti, err := b.c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ti.State != keel.StatePending || ti.Attempt != 0 || len(ti.Errors) != 0 {
			t.Fatalf("held task %d after Stop: %s, attempt %d, errors %v; want pending, attempt 0, none", id, ti.State, ti.Attempt, ti.Errors)
		}
	}
	b.releaseAll()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return")
	}
	if ids := b.running(t); len(ids) != 0 {
		t.Fatalf("tasks %v left running after Stop", ids)
	}
	if ti, err := b.c.Get(context.Background(), run); err != nil || ti.State != keel.StateSucceeded {
		t.Fatalf("the running task after Stop: %+v, %v; want succeeded", ti, err)
	}
	for _, id := range held {
		if n, ok := b.runs.Load(id); ok {
			t.Fatalf("held task %d ran %d times", id, n.(*atomic.Int64).Load())
		}
	}
}

// TestPrefetchedLeaseRenewed: a task held behind a handler that runs for
// more than two lease TTLs keeps its lease (the rescuer does not take it
// back), and its timeout counts from its own start.
func TestPrefetchedLeaseRenewed(t *testing.T) {
	sq, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	var runs [2]atomic.Int64
	h := keel.NewHandlers()
	// The first task runs 5s, the second 3s, each well within the type's
	// 6s timeout from its own start; counted from the claim, the second
	// would time out.
	keel.Handle(h, "t.slow", func(ctx context.Context, task *keel.Task[payload]) error {
		runs[task.Args.N].Add(1)
		select {
		case <-time.After([]time.Duration{5 * time.Second, 3 * time.Second}[task.Args.N]):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, keel.Timeout(6*time.Second))
	c, err := keel.NewClient(keel.Config{Driver: sq, Handlers: h,
		Queues:   map[string]keel.QueueConfig{"default": {MaxWorkers: 1, Prefetch: 1}},
		LeaseTTL: 2 * time.Second, HeartbeatInterval: 300 * time.Millisecond, RescueInterval: 200 * time.Millisecond,
		PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 2 {
		ti, err := c.Enqueue(context.Background(), "t.slow", payload{N: i}, keel.Priority(1-i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ti.ID)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(4 * time.Second)
	for {
		ti, err := c.Get(context.Background(), ids[1])
		if err != nil {
			t.Fatal(err)
		}
		if ti.State == keel.StateRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second task was not claimed ahead: %s", ti.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if runs[1].Load() != 0 {
		t.Fatal("the second task's handler started while the first ran")
	}
	waitState(t, c, keel.StateSucceeded, 2)
	for i, id := range ids {
		ti, err := c.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ti.Attempt != 1 || len(ti.Errors) != 0 || runs[i].Load() != 1 {
			t.Fatalf("task %d: attempt %d, errors %v, %d runs; want one attempt, no error", i, ti.Attempt, ti.Errors, runs[i].Load())
		}
	}
}

// TestPrefetchHoldsNoLimitedTask: a type under a cluster-wide concurrency
// is claimed within its limit only: nothing of it is held ahead.
func TestPrefetchHoldsNoLimitedTask(t *testing.T) {
	b := prefetchSetup(t, keel.QueueConfig{MaxWorkers: 4, Prefetch: 4}, func(c *keel.Config) { c.SettingsInterval = 50 * time.Millisecond })
	one := 1
	if _, err := b.c.UpdateType(context.Background(), "t.work", keel.TypeUpdate{Concurrency: &one}); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, 6)
	b.start(t)
	b.waitStarted(t, 1)
	for range 20 {
		if ids := b.running(t); len(ids) != 1 {
			t.Fatalf("%d tasks running in the database with the type's concurrency 1, want 1", len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPrefetchedTaskCancelled: cancelling a held task frees its place and
// its handler never runs.
func TestPrefetchedTaskCancelled(t *testing.T) {
	b := prefetchSetup(t, keel.QueueConfig{MaxWorkers: 1, Prefetch: 1})
	ids := b.enqueue(t, 3)
	b.start(t)
	if run := b.waitStarted(t, 1)[0]; run != ids[0] {
		t.Fatalf("task %d started first, want %d", run, ids[0])
	}
	b.waitRunning(t, 2)
	if _, err := b.c.Cancel(context.Background(), ids[1]); err != nil {
		t.Fatal(err)
	}
	if got := b.waitRunning(t, 2); !slices.Equal(got, []int64{ids[0], ids[2]}) {
		t.Fatalf("running %v after cancelling the held task, want %v", got, []int64{ids[0], ids[2]})
	}
	b.release <- struct{}{}
	if next := b.waitStarted(t, 1)[0]; next != ids[2] {
		t.Fatalf("task %d started next, want %d", next, ids[2])
	}
	if _, ok := b.runs.Load(ids[1]); ok {
		t.Fatal("the cancelled held task ran")
	}
}
