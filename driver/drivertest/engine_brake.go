package drivertest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/server/httptarget"
)

// testEngineBrake: the automatic brake against an HTTP target that fails
// and then recovers. The type's brake (5 attempts, ratio 0.5, cooldown
// 2s) opens after its failures: its tasks stay pending and the target
// gets no request, and a brake_open alert fires. After the cooldown one
// probe task runs; it fails, so the brake reopens. Once the target
// recovers, the next probe succeeds, the brake closes, the alert
// resolves and every task runs. The real clock drives it (cooldowns
// pass in real time).
func testEngineBrake(t *testing.T, e *env) {
	var failing atomic.Bool
	var requests atomic.Int64
	failing.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if failing.Load() {
			http.Error(w, "down for the test", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer target.Close()
	h := keel.NewHandlers()
	if err := httptarget.Register(h, "br.hook", httptarget.Target{URL: target.URL}, keel.Brake(5, 0.5, 2*time.Second),
		keel.MaxAttempts(1000), keel.Backoff(time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	c := e.newClient(keel.Config{Handlers: h, Now: time.Now, SettingsInterval: 50 * time.Millisecond,
		Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: 1}},
		Alerts: keel.AlertConfig{Interval: 50 * time.Millisecond}})
	const tasks = 8
	var ids []int64
	for i := range tasks {
		info, err := c.Enqueue(e.ctx, "br.hook", map[string]int{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	e.startClient(c)
	brake := func() keel.BrakeInfo {
		t.Helper()
		bs, err := c.Brakes(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.Type == "br.hook" {
				return b
			}
		}
		return keel.BrakeInfo{State: keel.BrakeClosed}
	}
	waitBrake := func(what string, cond func(b keel.BrakeInfo) bool) keel.BrakeInfo {
		t.Helper()
		var b keel.BrakeInfo
		waitFor(t, what, func() bool { b = brake(); return cond(b) })
		return b
	}
	alerts := func(firing bool) []*keel.Alert {
		t.Helper()
		as, err := c.Alerts(e.ctx, keel.AlertFilter{Rule: keel.RuleBrakeOpen, Subject: "type:br.hook", Firing: firing})
		if err != nil {
			t.Fatal(err)
		}
		return as
	}

	opened := waitBrake("the brake to open", func(b keel.BrakeInfo) bool { return b.State == keel.BrakeOpen })
	if opened.Attempts < 5 || opened.Ratio < 0.5 || !strings.Contains(opened.Reason, "attempts failed") {
		t.Fatalf("opened brake %+v", opened)
	}
	waitFor(t, "the brake_open alert", func() bool { return len(alerts(true)) == 1 })
	// Open: nothing of the type is claimed; its tasks wait, pending.
	// A claim that began before this node read the open brake may still
	// start one attempt: wait until none ran for 200ms.
	last, quietSince := requests.Load(), time.Now()
	waitFor(t, "the attempts begun before the brake opened to end", func() bool {
		if n := requests.Load(); n != last || e.countState(c, keel.StateRunning) != 0 {
			last, quietSince = n, time.Now()
		}
		return time.Since(quietSince) > 200*time.Millisecond
	})
	seen := requests.Load()
	time.Sleep(opened.Until.Sub(time.Now()) / 2)
	if n := requests.Load(); n != seen || e.countState(c, keel.StatePending) != tasks {
		t.Fatalf("while open: %d requests (were %d), %d pending (want all %d)", n, seen, e.countState(c, keel.StatePending), tasks)
	}
	// Stats and the ETA say the tasks wait for the brake.
	st, err := c.Stats(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var braked bool
	for _, q := range st.Queues {
		for _, ts := range q.Types {
			if ts.Name == "br.hook" {
				braked = ts.Braked && ts.TimeToDrain == 0
			}
		}
	}
	if !braked {
		t.Fatalf("stats while the brake is open: %+v, want br.hook braked with no time to drain", st.Queues)
	}
	task, err := c.Get(e.ctx, ids[len(ids)-1])
	if err != nil {
		t.Fatal(err)
	}
	if est, err := c.Estimate(e.ctx, task); err != nil || est == nil || est.Status != keel.ETABraked {
		t.Fatalf("estimate of a braked task: %+v, %v; want status braked", est, err)
	}
	// The cooldown passes: one probe runs, fails, and the brake reopens.
	reopened := waitBrake("the probe to fail and the brake to reopen", func(b keel.BrakeInfo) bool {
		return b.State == keel.BrakeOpen && strings.Contains(b.Reason, "probe task")
	})
	if n := requests.Load(); n != seen+1 {
		t.Fatalf("%d requests during the first half-open, want exactly 1 (the probe)", n-seen)
	}
	if !reopened.Until.After(opened.Until) || !strings.Contains(reopened.Reason, "500") {
		t.Fatalf("reopened brake %+v after %+v", reopened, opened)
	}
	// The target recovers: the next probe succeeds and the brake closes.
	failing.Store(false)
	closed := waitBrake("the brake to close", func(b keel.BrakeInfo) bool { return b.State == keel.BrakeClosed })
	if !strings.Contains(closed.Reason, "succeeded") || closed.ClosedAt.IsZero() {
		t.Fatalf("closed brake %+v", closed)
	}
	waitFor(t, "every task to succeed", func() bool { return e.countState(c, keel.StateSucceeded) == tasks })
	waitFor(t, "the alert to resolve", func() bool { return len(alerts(true)) == 0 && len(alerts(false)) == 1 })
	if b := brake(); b.State != keel.BrakeClosed {
		t.Fatalf("brake %+v after the tasks succeeded", b)
	}
}

// countState counts the br.hook tasks in state (keel's own alert
// deliveries aside).
func (e *env) countState(c *keel.Client, s keel.State) int {
	e.t.Helper()
	list, err := c.List(e.ctx, keel.Filter{State: s, Type: "br.hook", Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(list)
}
