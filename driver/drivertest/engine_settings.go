package drivertest

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// Runtime settings are changed through one client (the "admin", as keel
// serve's API does) and applied by a worker client of its own, as another
// node would: through keel_settings, not in-process state.

const settingsInterval = 20 * time.Millisecond

func ref[T any](v T) *T { return &v }

// stillPending checks that task id stays pending for a while: long enough
// for a worker polling every 10ms to have claimed it many times over.
func (e *env) stillPending(id int64, why string) {
	e.t.Helper()
	time.Sleep(150 * time.Millisecond)
	if row := e.get(id); row.State != driver.StatePending || row.Attempt != 0 {
		e.t.Fatalf("%s: task %d is %s after %d attempts, want untouched", why, id, row.State, row.Attempt)
	}
}

func testEngineQueuePause(t *testing.T, e *env) {
	admin := e.enqueuer()
	if _, err := admin.UpdateQueue(e.ctx, "default", keel.QueueUpdate{Paused: ref(true)}); err != nil {
		t.Fatal(err)
	}
	e.worker(keel.Config{SettingsInterval: settingsInterval}, func(ctx context.Context, task *keel.Task[args]) error { return nil })
	info := e.enqueue(admin, 1)
	e.stillPending(info.ID, "paused queue")
	qs, err := admin.Queues(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, q := range qs {
		if q.Name == "default" {
			found = true
			if !q.Paused || q.Counts[keel.StatePending] != 1 {
				t.Fatalf("queue listing %+v, want paused with 1 pending", q)
			}
		}
	}
	if !found {
		t.Fatalf("queue default not listed: %+v", qs)
	}
	if _, err := admin.UpdateQueue(e.ctx, "default", keel.QueueUpdate{Paused: ref(false)}); err != nil {
		t.Fatal(err)
	}
	e.waitState(info.ID, driver.StateSucceeded) // the worker's refresh saw the resume
}

func testEngineQueueConcurrency(t *testing.T, e *env) {
	admin := e.enqueuer()
	if _, err := admin.UpdateQueue(e.ctx, "default", keel.QueueUpdate{Concurrency: ref(2)}); err != nil {
		t.Fatal(err)
	}
	var now, peak atomic.Int32
	e.worker(keel.Config{SettingsInterval: settingsInterval, Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 10}}},
		func(ctx context.Context, task *keel.Task[args]) error {
			n := now.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(3 * time.Millisecond)
			now.Add(-1)
			return nil
		})
	var ids []int64
	for i := range 20 {
		ids = append(ids, e.enqueue(admin, i).ID)
	}
	for _, id := range ids {
		e.waitState(id, driver.StateSucceeded)
	}
	if p := peak.Load(); p != 2 && p != 1 {
		t.Fatalf("%d handlers ran at once with the queue's concurrency set to 2 (MaxWorkers 10)", p)
	}
}

func testEngineTypePause(t *testing.T, e *env) {
	admin := e.enqueuer()
	if _, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Paused: ref(true)}); err != nil {
		t.Fatal(err)
	}
	h := keel.NewHandlers()
	keel.Handle(h, "dt.task", func(ctx context.Context, task *keel.Task[args]) error { return nil })
	keel.Handle(h, "dt.other", func(ctx context.Context, task *keel.Task[args]) error { return nil })
	e.startClient(e.newClient(keel.Config{Handlers: h, SettingsInterval: settingsInterval}))
	paused := e.enqueue(admin, 1)
	other, err := admin.Enqueue(e.ctx, "dt.other", args{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	e.waitState(other.ID, driver.StateSucceeded) // other types of the queue still run
	e.stillPending(paused.ID, "paused type")
	if _, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Paused: ref(false)}); err != nil {
		t.Fatal(err)
	}
	e.waitState(paused.ID, driver.StateSucceeded)
}

func testEngineTypeOverrides(t *testing.T, e *env) {
	admin := e.enqueuer()
	if _, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{
		Timeout: ref(30 * time.Millisecond), BackoffBase: ref(7 * time.Second), BackoffMax: ref(7 * time.Second),
	}); err != nil {
		t.Fatal(err)
	}
	e.worker(keel.Config{SettingsInterval: settingsInterval}, func(ctx context.Context, task *keel.Task[args]) error {
		<-ctx.Done() // only the type's 30ms timeout ends this
		return ctx.Err()
	})
	t0 := e.clock.Now()
	info := e.enqueue(admin, 1, keel.Timeout(time.Hour), keel.MaxAttempts(3))
	row := e.waitErrors(info.ID, 1)
	if row.State != driver.StatePending || row.Errors[0].Outcome != driver.OutcomeTimeout {
		t.Fatalf("first attempt under the type's 30ms timeout: %s %+v", row.State, row.Errors[0])
	}
	if !row.RunAt.Equal(t0.Add(7 * time.Second)) {
		t.Fatalf("retry at +%v, want the type's backoff 7s", row.RunAt.Sub(t0))
	}
	// Lowering max attempts to the attempts used dead-letters the next failure.
	if _, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{MaxAttempts: ref(2)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * settingsInterval)
	e.clock.Advance(7 * time.Second)
	if row := e.waitErrors(info.ID, 2); row.State != driver.StateDead {
		t.Fatalf("after the second failure with max_attempts overridden to 2: %s", row.State)
	}
	types, err := admin.Types(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ty := range types {
		if ty.Name == "dt.task" && (ty.Timeout != 30*time.Millisecond || ty.MaxAttempts != 2 || ty.Counts[keel.StateDead] != 1) {
			t.Fatalf("type listing %+v", ty)
		}
	}
}

func testEngineSettingsBadInput(t *testing.T, e *env) {
	admin := e.enqueuer()
	bad := []struct {
		name string
		call func() error
	}{
		{"queue name", func() error {
			_, err := admin.UpdateQueue(e.ctx, "bad name", keel.QueueUpdate{Paused: ref(true)})
			return err
		}},
		{"negative concurrency", func() error {
			_, err := admin.UpdateQueue(e.ctx, "default", keel.QueueUpdate{Concurrency: ref(-1)})
			return err
		}},
		{"nothing", func() error { _, err := admin.UpdateQueue(e.ctx, "default", keel.QueueUpdate{}); return err }},
		{"type timeout", func() error {
			_, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Timeout: ref(time.Microsecond)})
			return err
		}},
		{"type attempts", func() error {
			_, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{MaxAttempts: ref(1001)})
			return err
		}},
		{"backoff order", func() error {
			_, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{BackoffBase: ref(time.Minute), BackoffMax: ref(time.Second)})
			return err
		}},
		{"negative rate", func() error {
			_, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Rate: ref(-1.0)})
			return err
		}},
		{"NaN rate", func() error {
			_, err := admin.UpdateQueue(e.ctx, "default", keel.QueueUpdate{Rate: ref(math.NaN())})
			return err
		}},
		{"infinite rate", func() error {
			_, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Rate: ref(math.Inf(1))})
			return err
		}},
		{"negative burst", func() error {
			_, err := admin.UpdateQueue(e.ctx, "default", keel.QueueUpdate{Burst: ref(-1)})
			return err
		}},
		{"huge burst", func() error {
			_, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Concurrency: ref(2), Burst: ref(keel.MaxBurst + 1)})
			return err
		}},
		{"filter state", func() error { _, err := admin.RetryMatching(e.ctx, keel.Filter{State: keel.StatePending}); return err }},
		{"filter limit", func() error { _, err := admin.PurgeMatching(e.ctx, keel.Filter{Limit: 10001}); return err }},
		{"filter type", func() error { _, err := admin.PurgeMatching(e.ctx, keel.Filter{Type: "a b"}); return err }},
	}
	for _, b := range bad {
		if err := b.call(); !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", b.name, err)
		}
	}
	settings, err := e.drv.ListSettings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(settings) != 0 {
		t.Fatalf("rejected changes wrote settings: %+v", settings)
	}
}

func testEngineBulkDeadLetters(t *testing.T, e *env) {
	var healed atomic.Bool // the "fix" deployed before requeueing
	h := keel.NewHandlers()
	keel.Handle(h, "dt.task", func(ctx context.Context, task *keel.Task[args]) error {
		if healed.Load() {
			return nil
		}
		return keel.Permanent(errors.New("boom"))
	})
	keel.Handle(h, "dt.other", func(ctx context.Context, task *keel.Task[args]) error {
		return keel.Permanent(errors.New("boom"))
	})
	c := e.newClient(keel.Config{Handlers: h})
	e.startClient(c)
	var task, other []int64
	for i := range 5 {
		task = append(task, e.enqueue(c, i).ID)
		info, err := c.Enqueue(e.ctx, "dt.other", args{N: i})
		if err != nil {
			t.Fatal(err)
		}
		other = append(other, info.ID)
	}
	for _, id := range append(append([]int64{}, task...), other...) {
		e.waitState(id, driver.StateDead)
	}
	healed.Store(true)
	n, err := c.RetryMatching(e.ctx, keel.Filter{Type: "dt.task", Limit: 3})
	if err != nil || n != 3 {
		t.Fatalf("requeue with limit 3: %d, %v", n, err)
	}
	n, err = c.RetryMatching(e.ctx, keel.Filter{Type: "dt.task"})
	if err != nil || n != 2 {
		t.Fatalf("requeue the rest: %d, %v", n, err)
	}
	for _, id := range task {
		if row := e.waitState(id, driver.StateSucceeded); row.Attempt != 1 {
			t.Fatalf("requeued task %d succeeded on attempt %d, want 1 (attempts reset)", id, row.Attempt)
		}
	}
	// Purging dt.other leaves the succeeded dt.task rows alone.
	n, err = c.PurgeMatching(e.ctx, keel.Filter{})
	if err != nil || n != 5 {
		t.Fatalf("purge dead: %d, %v", n, err)
	}
	for _, id := range other {
		if _, err := e.drv.Get(e.ctx, id); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("purged task %d: %v", id, err)
		}
	}
	if got := e.total(); got != 5 {
		t.Fatalf("%d tasks left, want the 5 succeeded ones", got)
	}
}

func testEngineETAAndStats(t *testing.T, e *env) {
	c := e.worker(keel.Config{Queues: map[string]keel.QueueConfig{"eta": {MaxWorkers: 4}}},
		func(ctx context.Context, task *keel.Task[args]) error {
			if task.Args.N < 0 {
				return keel.Permanent(errors.New("bad"))
			}
			return nil
		})
	// Ten tasks end one second apart (the suite's clock stands still while
	// they run): ten starts and ten finishes over ten busy seconds.
	for i := range 10 {
		n := i
		if i >= 6 {
			n = -i
		}
		e.waitState(e.enqueue(c, n, keel.Queue("eta")).ID, map[bool]driver.State{true: driver.StateDead, false: driver.StateSucceeded}[n < 0])
		e.clock.Advance(time.Second)
	}
	s, err := c.Stats(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Counts[keel.StateSucceeded] != 6 || s.Counts[keel.StateDead] != 4 {
		t.Fatalf("stats counts %v", s.Counts)
	}
	if s.DeadLastHour != 4 {
		t.Fatalf("dead last hour %d, want 4", s.DeadLastHour)
	}
	var q *keel.QueueStats
	for i := range s.Queues {
		if s.Queues[i].Name == "eta" {
			q = &s.Queues[i]
		}
	}
	// Ten finished over the ten seconds from the first end to now.
	if q == nil || q.DeadLastHour != 4 || math.Abs(q.Rates.M5-1) > 1e-9 || math.Abs(q.Rates.M1-1) > 1e-9 ||
		q.Views[keel.ViewDead] != 4 || !q.Served || len(q.Types) != 1 || q.Types[0].DeadLastHour != 4 {
		t.Fatalf("queue stats %+v", q)
	}
	// Tasks of a type the worker does not run wait in its queue: four
	// free workers take the first four now, the rest follow at the
	// measured rate of one start a second.
	en := e.enqueuer()
	var waiting []*keel.TaskInfo
	for i := range 6 {
		info, err := en.Enqueue(e.ctx, "dt.other", args{N: i}, keel.Queue("eta"))
		if err != nil {
			t.Fatal(err)
		}
		waiting = append(waiting, info)
	}
	now := e.clock.Now()
	for i, info := range waiting {
		est, err := c.Estimate(e.ctx, info)
		if err != nil || est == nil || est.Status != keel.ETAEstimated {
			t.Fatalf("estimate of task %d: %+v %v", i, est, err)
		}
		want := now.Add(time.Duration(max(0, i-3)) * time.Second)
		if est.Ahead != int64(i) || est.Start.Sub(want).Abs() > time.Millisecond {
			t.Fatalf("estimate of the task with %d ahead: %+v, want a start at +%v", i, est, want.Sub(now))
		}
	}
	// A client that runs no workers knows the worker's four slots from
	// the node registry, and estimates the same.
	if est, err := en.Estimate(e.ctx, waiting[5]); err != nil || est == nil || est.Status != keel.ETAEstimated ||
		est.Start.Sub(now.Add(2*time.Second)).Abs() > time.Millisecond {
		t.Fatalf("estimate of an enqueue-only client: %+v %v, want a start at +2s", est, err)
	}
	later := e.enqueue(c, 20, keel.Queue("eta"), keel.Delay(time.Hour))
	if eta, ok, err := c.ETA(e.ctx, later); err != nil || !ok || !eta.Equal(later.RunAt) {
		t.Fatalf("ETA of a scheduled task: %v %v %v, want its run_at", eta, ok, err)
	}
	s, err = c.Stats(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Queues {
		if q := s.Queues[i]; q.Name == "eta" && (q.Views[keel.ViewReady] != 6 || q.Views[keel.ViewScheduled] != 1) {
			t.Fatalf("eta views %v, want 6 ready and 1 scheduled", q.Views)
		}
	}
	// A paused queue says so.
	if _, err := c.UpdateQueue(e.ctx, "eta", keel.QueueUpdate{Paused: ref(true)}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Second) // past the estimate's cached snapshot
	if est, err := c.Estimate(e.ctx, waiting[5]); err != nil || est.Status != keel.ETAPaused {
		t.Fatalf("estimate in a paused queue: %+v %v", est, err)
	}
	if _, err := c.UpdateQueue(e.ctx, "eta", keel.QueueUpdate{Paused: ref(false)}); err != nil {
		t.Fatal(err)
	}
	// Two hours later there is no history: the free workers still take
	// the first four, but the sixth has no rate to wait by.
	e.clock.Advance(2 * time.Hour)
	if est, err := c.Estimate(e.ctx, waiting[5]); err != nil || est.Status != keel.ETAUnknown {
		t.Fatalf("estimate without recent history: %+v %v", est, err)
	}
	// No process serves this queue.
	idle := e.enqueue(c, 30, keel.Queue("unserved"))
	if est, err := c.Estimate(e.ctx, idle); err != nil || est.Status != keel.ETANoWorker {
		t.Fatalf("estimate in a queue nobody works: %+v %v", est, err)
	}
}

func testEngineTypeConcurrency(t *testing.T, e *env) {
	admin := e.enqueuer()
	if _, err := admin.UpdateType(e.ctx, "dt.task", keel.TypeUpdate{Concurrency: ref(2)}); err != nil {
		t.Fatal(err)
	}
	var now, peak, otherPeak, otherNow atomic.Int32
	track := func(cur, top *atomic.Int32) func() {
		n := cur.Add(1)
		for p := top.Load(); n > p && !top.CompareAndSwap(p, n); p = top.Load() {
		}
		return func() { cur.Add(-1) }
	}
	release := make(chan struct{})
	h := keel.NewHandlers()
	keel.Handle(h, "dt.task", func(ctx context.Context, task *keel.Task[args]) error {
		defer track(&now, &peak)()
		time.Sleep(3 * time.Millisecond)
		return nil
	})
	keel.Handle(h, "dt.other", func(ctx context.Context, task *keel.Task[args]) error {
		defer track(&otherNow, &otherPeak)()
		<-release // held until the capped type is done
		return nil
	})
	// An hour's poll: only wake-ups move the worker, so a capped type must
	// be claimed again as soon as one of its tasks ends.
	c := e.newClient(keel.Config{Handlers: h, SettingsInterval: settingsInterval, PollInterval: time.Hour,
		Queues: map[string]keel.QueueConfig{"default": {MaxWorkers: 10}}})
	e.startClient(c)
	var others []int64
	for i := range 3 {
		info, err := c.Enqueue(e.ctx, "dt.other", args{N: i})
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, info.ID)
	}
	var ids []int64
	for i := range 20 {
		ids = append(ids, e.enqueue(c, i).ID)
	}
	for _, id := range ids {
		e.waitState(id, driver.StateSucceeded)
	}
	close(release)
	for _, id := range others {
		e.waitState(id, driver.StateSucceeded)
	}
	if p := peak.Load(); p != 2 && p != 1 {
		t.Fatalf("%d tasks of the type ran at once with its concurrency set to 2", p)
	}
	if p := otherPeak.Load(); p != 3 {
		t.Fatalf("%d tasks of an uncapped type ran at once beside the capped one, want all 3", p)
	}
	types, err := admin.Types(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ty := range types {
		if ty.Name == "dt.task" && ty.Concurrency != 2 {
			t.Fatalf("type listing %+v, want concurrency 2", ty)
		}
	}
}
