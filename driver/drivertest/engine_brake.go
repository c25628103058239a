package drivertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/server/httptarget"
)

// RunBrakeScenarios runs the automatic brake's scenarios on the driver,
// one after the other (they time drains, so they do not run beside the
// rest of the suite): a downstream answering 503 to everything, 5 %
// poison tasks among good ones, a downstream failing every task's first
// two attempts, and a probe cancelled by an operator. The real clock
// drives them; cooldowns and backoffs are scaled down together.
func RunBrakeScenarios(t *testing.T, open Opener) {
	for _, tc := range []test{
		{"DownstreamDownOpensAndRecovers", testBrakeDownstreamDown},
		{"PoisonTasksNeverOpen", testBrakePoison},
		{"FailFirstTwoAttemptsDrains", testBrakeFailFirstTwo},
		{"CancelledProbeIsReplaced", testBrakeCancelledProbe},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newEnv(t, open)) })
	}
}

// brakePayload is the scenarios' task payload.
type brakePayload struct {
	N int `json:"n"`
}

// brakeOf returns taskType's brake as stored (closed when it has none).
func brakeOf(e *env, c *keel.Client, taskType string) keel.BrakeInfo {
	e.t.Helper()
	bs, err := c.Brakes(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, b := range bs {
		if b.Type == taskType {
			return b
		}
	}
	return keel.BrakeInfo{Type: taskType, State: keel.BrakeClosed}
}

// countOf counts taskType's tasks in state s.
func countOf(e *env, c *keel.Client, taskType string, s keel.State) int {
	e.t.Helper()
	list, err := c.List(e.ctx, keel.Filter{State: s, Type: taskType, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(list)
}

// testBrakeDownstreamDown: an HTTP target answers 503 to every request.
// With the default window (20) and threshold, 4 workers, the brake opens
// within window + 5 requests; while it is open the target gets nothing and
// the tasks wait, pending, braked in the stats and the ETA, with a
// brake_open alert. Each half-open probe fails and reopens it. When the
// target recovers a probe succeeds, the trickle widens, the brake closes,
// the alert resolves and the backlog drains.
func testBrakeDownstreamDown(t *testing.T, e *env) {
	var down atomic.Bool
	var requests atomic.Int64
	var arrivals struct {
		sync.Mutex
		first []time.Time // when each first attempt's request came
		all   []time.Time // when each request came
	}
	down.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		arrivals.Lock()
		arrivals.all = append(arrivals.all, time.Now())
		if r.Header.Get("Keel-Attempt") == "1" {
			arrivals.first = append(arrivals.first, time.Now())
		}
		arrivals.Unlock()
		if down.Load() {
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	const typ, tasks, cooldown = "br.down", 200, 400 * time.Millisecond
	h := keel.NewHandlers()
	if err := httptarget.Register(h, typ, httptarget.Target{URL: target.URL}, keel.Brake(0, 0, cooldown),
		keel.MaxAttempts(1000), keel.Backoff(time.Second, 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	c := e.newClient(keel.Config{Handlers: h, Now: time.Now, SettingsInterval: 50 * time.Millisecond,
		Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 4}},
		Alerts: keel.AlertConfig{Interval: 50 * time.Millisecond}})
	var ids []int64
	for i := range tasks {
		info, err := c.Enqueue(e.ctx, typ, map[string]int{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	e.startClient(c)
	alerts := func(firing bool) []*keel.Alert {
		t.Helper()
		as, err := c.Alerts(e.ctx, keel.AlertFilter{Rule: keel.RuleBrakeOpen, Subject: "type:" + typ, Firing: firing})
		if err != nil {
			t.Fatal(err)
		}
		return as
	}

	var opened keel.BrakeInfo
	waitFor(t, "the brake to open", func() bool { opened = brakeOf(e, c, typ); return opened.State == keel.BrakeOpen })
	waitFor(t, "the attempts begun before the brake opened to end", func() bool {
		return countOf(e, c, typ, keel.StateRunning) == 0
	})
	// Every request is an attempt. Retries come after a backoff of a
	// second: on a loaded machine a few may run before the window fills,
	// and they are attempts the brake does not judge (they bring no
	// evidence): the bound is on the tasks tried.
	// The tasks tried before the cooldown ended (after it, the half-open
	// probes run; on a loaded machine the wait above may outlast it).
	arrivals.Lock()
	tried := 0
	for _, at := range arrivals.first {
		if at.Before(opened.Until) {
			tried++
		}
	}
	arrivals.Unlock()
	if tried > keel.DefaultBrakeWindow+5 || opened.Attempts != keel.DefaultBrakeWindow || opened.Ratio != 1 ||
		!strings.Contains(opened.Reason, "20 of the last 20 tasks") {
		t.Fatalf("%d tasks tried before the cooldown ended (want at most %d): %+v", tried, keel.DefaultBrakeWindow+5, opened)
	}
	waitFor(t, "the brake_open alert", func() bool { return len(alerts(true)) == 1 })
	// Open: nothing of the type is claimed; the stats and the ETA say so.
	// While open, no claim takes the type (a claim already under way when
	// the brake opened may still start its tasks: they are in the bound
	// above, which counts every task tried before the cooldown ended).
	time.Sleep(time.Until(opened.Until) / 2)
	st, err := c.Stats(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	braked := false
	for _, q := range st.Queues {
		for _, ts := range q.Types {
			braked = braked || ts.Name == typ && ts.Braked && ts.TimeToDrain == 0
		}
	}
	task, err := c.Get(e.ctx, ids[len(ids)-1])
	if err != nil {
		t.Fatal(err)
	}
	if est, err := c.Estimate(e.ctx, task); !braked || err != nil || est == nil || est.Status != keel.ETABraked {
		t.Fatalf("while braked: stats braked %v, estimate %+v, %v", braked, est, err)
	}
	// Half open: the probes find the target down and the brake reopens.
	var reopened keel.BrakeInfo
	waitFor(t, "a probe to fail and the brake to reopen", func() bool {
		reopened = brakeOf(e, c, typ)
		return reopened.State == keel.BrakeOpen && strings.Contains(reopened.Reason, "probe task")
	})
	if !reopened.Until.After(opened.Until) || !strings.Contains(reopened.Reason, "503") {
		t.Fatalf("reopened brake %+v after %+v", reopened, opened)
	}
	arrivals.Lock()
	probes := 0
	for _, at := range arrivals.all {
		if !at.Before(opened.Until) && at.Before(reopened.Until.Add(-cooldown)) {
			probes++
		}
	}
	arrivals.Unlock()
	if probes < 1 || probes > 6 {
		t.Fatalf("%d requests in the first half-open, want the first few probes only (1..6)", probes)
	}
	// The target recovers: the probes succeed and the brake closes.
	down.Store(false)
	var closed keel.BrakeInfo
	waitFor(t, "the brake to close", func() bool { closed = brakeOf(e, c, typ); return closed.State == keel.BrakeClosed })
	if !strings.Contains(closed.Reason, "probes succeeded") || closed.ClosedAt.IsZero() {
		t.Fatalf("closed brake %+v", closed)
	}
	waitFor(t, "every task to succeed", func() bool { return countOf(e, c, typ, keel.StateSucceeded) == tasks })
	waitFor(t, "the alert to resolve", func() bool { return len(alerts(true)) == 0 && len(alerts(false)) == 1 })
	if b := brakeOf(e, c, typ); b.State != keel.BrakeClosed {
		t.Fatalf("brake %+v after the backlog drained", b)
	}
}

// testBrakePoison: 1,000 tasks, one in 20 failing with a retryable error
// until its 25th attempt; their backoff keeps them failing after the rest
// have succeeded. The default brake never opens.
func testBrakePoison(t *testing.T, e *env) {
	const typ, tasks = "br.poison", 1000
	var poisonRuns atomic.Int64 // the attempts of poison task 0
	h := keel.NewHandlers()
	keel.Handle(h, typ, func(ctx context.Context, task *keel.Task[brakePayload]) error {
		if task.Args.N == 0 {
			poisonRuns.Add(1)
		}
		if task.Args.N%20 == 0 {
			return fmt.Errorf("poison task %d", task.Args.N)
		}
		return nil
	}, keel.MaxAttempts(25), keel.Backoff(20*time.Millisecond, 400*time.Millisecond), keel.Brake(0, 0, 200*time.Millisecond))
	c := e.newClient(keel.Config{Handlers: h, Now: time.Now, SettingsInterval: 50 * time.Millisecond,
		Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 8}}})
	batch := make([]keel.TaskSpec, tasks)
	for i := range batch {
		batch[i] = keel.TaskSpec{Type: typ, Payload: map[string]int{"n": i}}
	}
	if _, err := c.EnqueueMany(e.ctx, batch); err != nil {
		t.Fatal(err)
	}
	e.startClient(c)
	deadline := time.Now().Add(2 * time.Minute)
	for countOf(e, c, typ, keel.StateSucceeded) < tasks-tasks/20 {
		if b := brakeOf(e, c, typ); !b.OpenedAt.IsZero() {
			t.Fatalf("the brake opened: %+v", b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the good tasks did not succeed within 2 minutes: %d", countOf(e, c, typ, keel.StateSucceeded))
		}
		time.Sleep(20 * time.Millisecond)
	}
	goodDone := time.Now()
	for countOf(e, c, typ, keel.StateDead) < tasks/20 {
		if b := brakeOf(e, c, typ); !b.OpenedAt.IsZero() {
			t.Fatalf("the brake opened: %+v", b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the poison tasks did not die within 2 minutes: %d dead", countOf(e, c, typ, keel.StateDead))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if time.Since(goodDone) < time.Second {
		t.Fatalf("the poison tasks died %v after the rest succeeded: the scenario wants them failing on after", time.Since(goodDone))
	}
	if b := brakeOf(e, c, typ); !b.OpenedAt.IsZero() {
		t.Fatalf("the brake opened: %+v", b)
	}
	if n := poisonRuns.Load(); n != 25 {
		t.Fatalf("poison task 0 ran %d times, want 25", n)
	}
}

// testBrakeFailFirstTwo: a downstream fails every task's first two
// attempts. With the default brake (its cooldown scaled like the backoff:
// both 30s by default, 300ms here) every task succeeds, within 3× the
// time the same drain takes with the brake off, run beside it.
func testBrakeFailFirstTwo(t *testing.T, e *env) {
	const tasks, backoff = 600, 300 * time.Millisecond
	// Both drains run at once, each on its own queue and client, so that
	// they share the machine's load: the ratio compares like with like.
	type drain struct {
		typ    string
		c      *keel.Client
		took   time.Duration
		brakes keel.BrakeInfo
	}
	prepare := func(typ string, brake keel.Option) *drain {
		t.Helper()
		h := keel.NewHandlers()
		keel.Handle(h, typ, func(ctx context.Context, task *keel.Task[brakePayload]) error {
			time.Sleep(5 * time.Millisecond) // the downstream's answer
			if task.Attempt <= 2 {
				return errors.New("try again later")
			}
			return nil
		}, keel.Queue(typ), keel.MaxAttempts(10), keel.Backoff(backoff, 10*backoff), brake)
		c := e.newClient(keel.Config{Handlers: h, Now: time.Now, SettingsInterval: 50 * time.Millisecond,
			Queues: map[string]keel.QueueConfig{typ: {MaxWorkers: 4}}})
		batch := make([]keel.TaskSpec, tasks)
		for i := range batch {
			batch[i] = keel.TaskSpec{Type: typ, Payload: map[string]int{"n": i}}
		}
		if _, err := c.EnqueueMany(e.ctx, batch); err != nil {
			t.Fatal(err)
		}
		return &drain{typ: typ, c: c}
	}
	off, on := prepare("br.ff.off", keel.NoBrake()), prepare("br.ff.on", keel.Brake(0, 0, backoff))
	began := time.Now()
	e.startClient(off.c)
	e.startClient(on.c)
	deadline := began.Add(3 * time.Minute)
	for off.took == 0 || on.took == 0 {
		for _, d := range []*drain{off, on} {
			if d.took == 0 && countOf(e, d.c, d.typ, keel.StateSucceeded) == tasks {
				d.took = time.Since(began)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 minutes: %d and %d of %d succeeded; brake %+v", countOf(e, off.c, off.typ, keel.StateSucceeded),
				countOf(e, on.c, on.typ, keel.StateSucceeded), tasks, brakeOf(e, on.c, on.typ))
		}
		time.Sleep(10 * time.Millisecond)
	}
	b := brakeOf(e, on.c, on.typ)
	t.Logf("drain with the brake off %v, on %v (%.1f×); brake %+v", off.took, on.took, float64(on.took)/float64(off.took), b)
	if on.took > 3*off.took {
		t.Fatalf("with the default brake the drain took %v, more than 3× the %v it takes with the brake off; brake %+v", on.took, off.took, b)
	}
}

// testBrakeCancelledProbe: an operator cancels a half-open brake's probe:
// another probe starts within one settings interval.
func testBrakeCancelledProbe(t *testing.T, e *env) {
	const typ, settings = "br.cancel", 500 * time.Millisecond
	var hang atomic.Bool
	started := make(chan int64, 100)
	h := keel.NewHandlers()
	keel.Handle(h, typ, func(ctx context.Context, task *keel.Task[brakePayload]) error {
		if !hang.Load() || task.Attempt == 1 {
			return errors.New("down")
		}
		started <- int64(task.Args.N)
		<-ctx.Done()
		return ctx.Err()
	}, keel.MaxAttempts(100), keel.Backoff(time.Millisecond, time.Millisecond), keel.Brake(5, 0, time.Second))
	c := e.newClient(keel.Config{Handlers: h, Now: time.Now, SettingsInterval: settings,
		Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 4}}})
	ids := map[int64]int64{} // n -> task id
	for i := range 20 {
		info, err := c.Enqueue(e.ctx, typ, map[string]int{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		ids[int64(i)] = info.ID
	}
	e.startClient(c)
	waitFor(t, "the brake to open", func() bool { return brakeOf(e, c, typ).State == keel.BrakeOpen })
	waitFor(t, "the attempts begun before the brake opened to end", func() bool {
		return countOf(e, c, typ, keel.StateRunning) == 0
	})
	hang.Store(true) // the probes, due retries first, hang until cancelled
	var first int64
	select {
	case first = <-started:
	case <-time.After(15 * time.Second):
		t.Fatalf("no probe started; brake %+v", brakeOf(e, c, typ))
	}
	if b := brakeOf(e, c, typ); b.State != keel.BrakeHalfOpen {
		t.Fatalf("a probe runs while the brake is %s", b.State)
	}
	// The trickle's first probes run; cancel one.
	time.Sleep(50 * time.Millisecond)
	running := countOf(e, c, typ, keel.StateRunning)
	if _, err := c.Cancel(e.ctx, ids[first]); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	select {
	case n := <-started:
		if n == first {
			t.Fatalf("the cancelled task %d ran again", ids[first])
		}
		if d := time.Since(cancelled); d > settings {
			t.Fatalf("the next probe started %v after the cancel, more than one settings interval (%v)", d, settings)
		}
	case <-time.After(settings):
		t.Fatalf("no probe replaced the cancelled one within a settings interval (%d ran); brake %+v", running, brakeOf(e, c, typ))
	}
	if b := brakeOf(e, c, typ); b.State != keel.BrakeHalfOpen {
		t.Fatalf("brake %+v after the cancelled probe, want half open", b)
	}
	// Let the hanging probes go (the ones that replace them fail at
	// once), so that the client stops at once.
	hang.Store(false)
	list, err := c.List(e.ctx, keel.Filter{State: keel.StateRunning, Type: typ, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range list {
		if _, err := c.Cancel(e.ctx, task.ID); err != nil && !errors.Is(err, keel.ErrWrongState) {
			t.Fatal(err)
		}
	}
}
