package drivertest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// Cluster-wide limits through keel.Client: several clients on one
// database stand for several nodes.

// peakGauge tracks how many handlers run at once and the most seen.
type peakGauge struct{ now, peak atomic.Int32 }

// enter counts one more running handler; the returned func counts it out.
func (g *peakGauge) enter() func() {
	n := g.now.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	return func() { g.now.Add(-1) }
}

// testEngineClusterConcurrency: a type's concurrency of 2 holds across
// three clients of 10 workers each, and is reached.
func testEngineClusterConcurrency(t *testing.T, e *env) {
	admin := e.enqueuer()
	if _, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Concurrency: ref(2)}); err != nil {
		t.Fatal(err)
	}
	var g peakGauge
	for range 3 {
		e.worker(keel.Config{SettingsInterval: settingsInterval, Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 10}}},
			func(ctx context.Context, task *keel.Task[args]) error {
				defer g.enter()()
				// Long enough that two runs overlap even when a loaded
				// database takes milliseconds per limited claim.
				time.Sleep(50 * time.Millisecond)
				return nil
			})
	}
	var ids []int64
	for i := range 30 {
		ids = append(ids, e.enqueue(admin, i).ID)
	}
	for _, id := range ids {
		e.waitState(id, driver.StateSucceeded)
	}
	if p := g.peak.Load(); p != 2 {
		t.Fatalf("at most %d tasks ran at once on three nodes with the type's concurrency 2, want exactly 2", p)
	}
}

// testEngineLimitedDoesNotDelay: a type limited to one slow task at a time
// with a long backlog does not hold up another type of the same queue.
func testEngineLimitedDoesNotDelay(t *testing.T, e *env) {
	admin := e.enqueuer()
	if _, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Concurrency: ref(1)}); err != nil {
		t.Fatal(err)
	}
	h := keel.NewHandlers()
	keel.Handle(h, "dt.task", func(ctx context.Context, task *keel.Task[args]) error {
		time.Sleep(200 * time.Millisecond)
		return nil
	})
	keel.Handle(h, "dt.other", func(ctx context.Context, task *keel.Task[args]) error { return nil })
	var limited []int64
	for i := range 40 {
		limited = append(limited, e.enqueue(admin, i).ID)
	}
	e.startClient(e.newClient(keel.Config{Handlers: h, SettingsInterval: settingsInterval,
		Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 4}}}))
	var others []int64
	for i := range 30 {
		info, err := admin.Enqueue(e.ctx, "dt.other", args{N: i})
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, info.ID)
	}
	for _, id := range others {
		e.waitState(id, driver.StateSucceeded)
	}
	pending := 0
	for _, id := range limited {
		if e.get(id).State == driver.StatePending {
			pending++
		}
	}
	// 40 tasks of 200 ms one at a time take 8 s; the other type's 30 quick
	// tasks finished while most of them still waited.
	if pending < 20 {
		t.Fatalf("only %d of 40 limited tasks still pending when the unlimited type's 30 had finished", pending)
	}
}

// testEngineRateLimit: a rate of 40 tasks per second over two clients
// holds within 10 % over 5 s after the first burst. The rate is low
// enough that a busy machine (the race detector, other packages' tests at
// once) still runs every task the limit lets through: a shortfall is then
// the limiter's, not the machine's.
func testEngineRateLimit(t *testing.T, e *env) {
	if testing.Short() {
		t.Skip("takes 7 s")
	}
	// The real clock: the bucket refills with time.
	admin := e.newClient(keel.Config{Types: []string{"dt.task"}, Now: time.Now})
	// A burst of half a second's tokens: a claim delayed by a busy machine
	// (SQLite's single writer commits with fsync) catches up instead of
	// losing tokens to a full bucket; it adds at most 20 to the 200.
	if _, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Rate: ref(40.0), Burst: ref(20)}); err != nil {
		t.Fatal(err)
	}
	batch := make([]keel.TaskSpec, 0, 600)
	for i := range 600 {
		batch = append(batch, keel.TaskSpec{Type: "dt.task", Payload: args{N: i}})
	}
	if _, err := admin.EnqueueMany(e.ctx, batch); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var starts []time.Time
	for range 2 {
		e.worker(keel.Config{Now: time.Now, SettingsInterval: settingsInterval, PollInterval: 200 * time.Millisecond,
			Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 20}}},
			func(ctx context.Context, task *keel.Task[args]) error {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				return nil
			})
	}
	waitFor(t, "the first start", func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) > 0 })
	mu.Lock()
	first := starts[0]
	mu.Unlock()
	from, to := first.Add(time.Second), first.Add(6*time.Second)
	time.Sleep(time.Until(to) + 200*time.Millisecond)
	mu.Lock()
	n := 0
	for _, s := range starts {
		if !s.Before(from) && s.Before(to) {
			n++
		}
	}
	total := len(starts)
	mu.Unlock()
	if n < 180 || n > 220 {
		t.Fatalf("%d tasks started in 5 s after the burst (%d in all), want 200 ± 10 %% at 40/s", n, total)
	}
	t.Logf("%d starts in 5 s: %.1f/s", n, float64(n)/5)
}

// typeConcurrency reads the stored concurrency of task type name.
func (e *env) typeConcurrency(name string) int {
	e.t.Helper()
	all, err := e.drv.ListSettings(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range all {
		if s.Kind == driver.SettingType && s.Name == name {
			return s.Concurrency
		}
	}
	return 0
}

// waitRamp waits until the ramp of "dt.task" satisfies cond.
func (e *env) waitRamp(c *keel.Client, what string, cond func(*keel.RampState) bool) *keel.RampState {
	e.t.Helper()
	var st *keel.RampState
	waitFor(e.t, what, func() bool {
		var err error
		st, err = c.GetRamp(e.ctx, "dt.task")
		if err != nil {
			e.t.Fatalf("get ramp: %v", err)
		}
		return cond(st)
	})
	return st
}

// runBatch enqueues n tasks and waits until each succeeded or is dead.
func (e *env) runBatch(c *keel.Client, n int, opts ...keel.Option) {
	e.t.Helper()
	var ids []int64
	for i := range n {
		ids = append(ids, e.enqueue(c, i, opts...).ID)
	}
	for _, id := range ids {
		e.waitTask(id, "finished", func(r *driver.TaskRow) bool {
			return r.State == driver.StateSucceeded || r.State == driver.StateDead
		})
	}
}

// testEngineRampAdvances: a ramp 1 → 2 → 3 waits for enough attempts,
// then advances a step per interval while the tasks succeed.
func testEngineRampAdvances(t *testing.T, e *env) {
	admin := e.enqueuer()
	if _, err := admin.GetRamp(e.ctx, "dt.task"); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("ramp before any: %v, want ErrNotFound", err)
	}
	e.worker(keel.Config{SettingsInterval: settingsInterval}, func(ctx context.Context, task *keel.Task[args]) error { return nil })
	st, err := admin.StartRamp(e.ctx, "dt.task", keel.Ramp{Steps: []int{1, 2, 3}, Every: time.Minute, MinAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	if st.Step != 0 || st.MaxFailureRatio != 0.2 || !st.NextAt.Equal(e.clock.Now().Add(time.Minute)) || e.typeConcurrency("dt.task") != 1 {
		t.Fatalf("started ramp %+v, concurrency %d; want step 0, default ratio 0.2, concurrency 1", st, e.typeConcurrency("dt.task"))
	}
	// Due without attempts: it waits for them.
	e.clock.Advance(time.Minute)
	e.waitRamp(admin, "a note that the ramp waits", func(s *keel.RampState) bool { return s.Note != "" })
	if c := e.typeConcurrency("dt.task"); c != 1 {
		t.Fatalf("concurrency %d without attempts, want 1", c)
	}
	e.runBatch(admin, 6)
	e.waitRamp(admin, "step 2", func(s *keel.RampState) bool { return s.Step == 1 })
	if c := e.typeConcurrency("dt.task"); c != 2 {
		t.Fatalf("concurrency %d at step 2, want 2", c)
	}
	e.clock.Advance(time.Minute)
	e.runBatch(admin, 6)
	st = e.waitRamp(admin, "the last step", func(s *keel.RampState) bool { return s.Done })
	if c := e.typeConcurrency("dt.task"); c != 3 || st.Step != 2 || st.Stopped {
		t.Fatalf("ramp %+v with concurrency %d, want done at step 3, concurrency 3", st, c)
	}
}

// testEngineRampStops: a step whose failure ratio passes the threshold
// stops the ramp, says why and keeps the concurrency.
func testEngineRampStops(t *testing.T, e *env) {
	admin := e.enqueuer()
	var failing atomic.Bool
	e.worker(keel.Config{SettingsInterval: settingsInterval}, func(ctx context.Context, task *keel.Task[args]) error {
		if failing.Load() && task.Args.N%2 == 0 {
			return errors.New("downstream says no")
		}
		return nil
	})
	if _, err := admin.StartRamp(e.ctx, "dt.task", keel.Ramp{Steps: []int{1, 2, 5}, Every: time.Minute,
		MinAttempts: 8, MaxFailureRatio: 0.25}); err != nil {
		t.Fatal(err)
	}
	// Successes in the step's own minute are not judged: they may have
	// run at the step before, and would water the failures down.
	e.runBatch(admin, 8)
	e.clock.Advance(time.Minute)
	failing.Store(true)
	e.runBatch(admin, 8, keel.MaxAttempts(1)) // half of them fail: dead
	st := e.waitRamp(admin, "the ramp to stop", func(s *keel.RampState) bool { return !s.Active() })
	if !st.Stopped || st.Step != 0 || !strings.Contains(st.Reason, "failure ratio 0.50 (4 of 8 attempts)") {
		t.Fatalf("ramp %+v, want stopped at step 1 with the failure ratio as reason", st)
	}
	if c := e.typeConcurrency("dt.task"); c != 1 {
		t.Fatalf("concurrency %d after the stop, want 1 kept", c)
	}
	// Bad ramps are refused and change nothing.
	for _, r := range []keel.Ramp{{}, {Steps: []int{2, 1}}, {Steps: []int{0, 1}}, {Steps: []int{1}, Every: time.Millisecond},
		{Steps: []int{1}, MaxFailureRatio: 1.5}, {Steps: []int{1}, MinAttempts: -1}} {
		if _, err := admin.StartRamp(e.ctx, "dt.task", r); !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("ramp %+v: %v, want ErrInvalid", r, err)
		}
	}
	if again, err := admin.GetRamp(e.ctx, "dt.task"); err != nil || again.Reason != st.Reason {
		t.Fatalf("ramp after refused starts: %+v, %v", again, err)
	}
}
