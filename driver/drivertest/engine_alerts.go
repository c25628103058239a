package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// hookReceiver is a local webhook: it answers 503 while down and records
// the bodies it accepted.
type hookReceiver struct {
	*httptest.Server
	down     atomic.Bool
	refused  atomic.Int64
	mu       sync.Mutex
	accepted []keel.WebhookBody
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.down.Load() {
			r.refused.Add(1)
			http.Error(w, "down for the test", http.StatusServiceUnavailable)
			return
		}
		var b keel.WebhookBody
		if err := json.NewDecoder(req.Body).Decode(&b); err != nil || b.Text == "" || req.Header.Get("Authorization") != "Bearer hook" {
			t.Errorf("webhook request: %v, text %q, auth %q", err, b.Text, req.Header.Get("Authorization"))
		}
		r.mu.Lock()
		r.accepted = append(r.accepted, b)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// got counts the accepted bodies by event and subject.
func (r *hookReceiver) got() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, b := range r.accepted {
		out[b.Event+" "+b.Subject]++
	}
	return out
}

func sameCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// testEngineAlerts: 4 dead letters trip dead_per_hour (above 3) for
// their type and for all types; each alert fires once; its webhook
// delivery is retried while the receiver is down and arrives once it is
// up; a runtime rule change resolves both, once.
func testEngineAlerts(t *testing.T, e *env) {
	hook := newHookReceiver(t)
	hook.down.Store(true)
	h := keel.NewHandlers()
	keel.Handle(h, "t.fail", func(ctx context.Context, task *keel.Task[args]) error {
		return keel.Permanent(errors.New("provider down"))
	})
	rules := keel.AlertRules{DeadPerHour: 3} // the other rules off
	c := e.newClient(keel.Config{Handlers: h, Now: time.Now, Alerts: keel.AlertConfig{
		Rules: &rules, Interval: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		Notifiers: []keel.Notifier{&keel.WebhookNotifier{ID: "hook", URL: hook.URL, Headers: map[string]string{"Authorization": "Bearer hook"}}},
	}})
	e.startClient(c)
	for i := range 4 {
		if _, err := c.Enqueue(e.ctx, "t.fail", args{N: i}); err != nil {
			t.Fatal(err)
		}
	}
	// notifier_failing may fire too while the webhook is down: this test
	// follows dead_per_hour (testEngineKeelWorkApart the other).
	firing := func() []*keel.Alert {
		as, err := c.Alerts(e.ctx, keel.AlertFilter{Rule: keel.RuleDeadPerHour, Firing: true})
		if err != nil {
			t.Fatal(err)
		}
		return as
	}
	// Both alerts fire; the webhook is tried again and again while down.
	waitFor(t, "two alerts whose webhook delivery was tried twice", func() bool {
		as := firing()
		if len(as) != 2 {
			return false
		}
		for _, a := range as {
			if d := delivery(a, "fired", "hook"); d == nil || d.Attempts < 2 {
				return false
			}
		}
		return true
	})
	subjects := map[string]bool{}
	for _, a := range firing() {
		subjects[a.Subject] = true
		if a.Rule != keel.RuleDeadPerHour || a.Values["dead"] != float64(4) || a.Hint == "" {
			t.Errorf("alert %+v", a)
		}
		if d := delivery(a, "fired", "hook"); !d.DeliveredAt.IsZero() || d.LastError == "" {
			t.Errorf("delivery while down: %+v", d)
		}
	}
	if !subjects["type:t.fail"] || !subjects["all"] {
		t.Fatalf("subjects %v", subjects)
	}
	hook.down.Store(false)
	want := map[string]int{"fired type:t.fail": 1, "fired all": 1}
	waitFor(t, "both alerts delivered", func() bool { return sameCounts(hook.got(), want) })
	time.Sleep(20 * 50 * time.Millisecond) // twenty evaluations: nothing fires again
	if got := hook.got(); !sameCounts(got, want) {
		t.Fatalf("after more evaluations the webhook got %v, want %v", got, want)
	}
	for _, a := range firing() {
		if d := delivery(a, "fired", "log"); d == nil || d.DeliveredAt.IsZero() {
			t.Errorf("alert %d: log delivery %+v", a.ID, d)
		}
	}

	// A runtime rule change applies at the next evaluation: both resolve.
	rules.DeadPerHour = 10
	if err := c.SetAlertRules(e.ctx, rules); err != nil {
		t.Fatal(err)
	}
	want["resolved type:t.fail"], want["resolved all"] = 1, 1
	waitFor(t, "both alerts resolved and delivered", func() bool { return sameCounts(hook.got(), want) })
	time.Sleep(20 * 50 * time.Millisecond)
	if got := hook.got(); !sameCounts(got, want) {
		t.Fatalf("after more evaluations the webhook got %v, want %v", got, want)
	}
	if as := firing(); len(as) != 0 {
		t.Fatalf("still firing: %+v", as[0])
	}
	all, err := c.Alerts(e.ctx, keel.AlertFilter{Rule: keel.RuleDeadPerHour})
	if err != nil || len(all) != 2 || all[0].ResolvedMessage == "" {
		t.Fatalf("history: %v %+v", err, all)
	}
	// A notifier configured later gets what fires from then on, not the
	// history: the clock is moved past the scan window so that the
	// resolutions above are old.
	late := newHookReceiver(t)
	c2 := e.newClient(keel.Config{Handlers: keel.NewHandlers(), Now: func() time.Time { return time.Now().Add(2 * time.Hour) },
		Alerts: keel.AlertConfig{Interval: 50 * time.Millisecond, Notifiers: []keel.Notifier{
			&keel.WebhookNotifier{ID: "late", URL: late.URL, Headers: map[string]string{"Authorization": "Bearer hook"}}}}})
	e.startClient(c2)
	time.Sleep(20 * 50 * time.Millisecond)
	if got := late.got(); len(got) != 0 {
		t.Fatalf("a notifier added later was sent the history: %v", got)
	}
	e.stop(c2)
	// Invalid rules are refused and change nothing.
	if err := c.SetAlertRules(e.ctx, keel.AlertRules{FailureRatio: 2}); !errors.Is(err, keel.ErrInvalid) {
		t.Fatalf("invalid rules: %v", err)
	}
	if r, runtime, err := c.AlertRules(e.ctx); err != nil || !runtime || r.DeadPerHour != 10 {
		t.Fatalf("rules after a refused change: %+v %v %v", r, runtime, err)
	}
}

// testEngineAlertCurrent: an alert fires with 4 dead letters; 6 more die
// while it fires; the next evaluation shows 10 as its current numbers and
// keeps the 4 it fired with, and fires nothing again.
func testEngineAlertCurrent(t *testing.T, e *env) {
	h := keel.NewHandlers()
	keel.Handle(h, "t.grow", func(ctx context.Context, task *keel.Task[args]) error {
		return keel.Permanent(errors.New("provider down"))
	})
	rules := keel.AlertRules{DeadPerHour: 3}
	c := e.newClient(keel.Config{Handlers: h, Now: time.Now, Alerts: keel.AlertConfig{Rules: &rules, Interval: 50 * time.Millisecond}})
	e.startClient(c)
	enqueue := func(n int) {
		for i := range n {
			if _, err := c.Enqueue(e.ctx, "t.grow", args{N: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	alert := func() *keel.Alert {
		as, err := c.Alerts(e.ctx, keel.AlertFilter{Firing: true, Subject: "type:t.grow"})
		if err != nil {
			t.Fatal(err)
		}
		if len(as) != 1 {
			return nil
		}
		return as[0]
	}
	enqueue(4)
	waitFor(t, "the alert of type t.grow", func() bool { return alert() != nil })
	fired := alert()
	if fired.Values["dead"] != float64(4) || fired.CurrentValues["dead"] != float64(4) || fired.CurrentMessage != fired.Message ||
		!fired.CurrentAt.Equal(fired.FiredAt) {
		t.Fatalf("just fired: %+v", fired)
	}
	enqueue(6)
	waitFor(t, "the alert's current numbers at 10 dead", func() bool {
		a := alert()
		return a != nil && a.CurrentValues["dead"] == float64(10)
	})
	a := alert()
	if a.ID != fired.ID || a.Message != fired.Message || a.Values["dead"] != float64(4) || !a.FiredAt.Equal(fired.FiredAt) {
		t.Errorf("the numbers it fired with changed: %+v, fired %+v", a, fired)
	}
	if !strings.Contains(a.CurrentMessage, "10 tasks of type t.grow") || !a.CurrentAt.After(a.FiredAt) {
		t.Errorf("current: %q at %v (fired %v)", a.CurrentMessage, a.CurrentAt, a.FiredAt)
	}
	got, err := c.GetAlert(e.ctx, a.ID)
	if err != nil || got.CurrentMessage != a.CurrentMessage || got.Message != a.Message {
		t.Errorf("GetAlert: %v %+v", err, got)
	}
	for _, d := range a.Deliveries {
		if d.Event != "fired" {
			t.Errorf("a delivery of %s while it fires: %+v", d.Event, d)
		}
	}
	if all, err := c.Alerts(e.ctx, keel.AlertFilter{Subject: "type:t.grow"}); err != nil || len(all) != 1 {
		t.Fatalf("alerts of type t.grow: %v, %d, want 1", err, len(all))
	}
}

func delivery(a *keel.Alert, event, notifier string) *keel.AlertDelivery {
	for i := range a.Deliveries {
		if d := &a.Deliveries[i]; d.Event == event && d.Notifier == notifier {
			return d
		}
	}
	return nil
}

// testEngineDrill: the drill passes with a working webhook and reports
// its delay, fails naming a broken one, and leaves no task behind.
func testEngineDrill(t *testing.T, e *env) {
	hook := newHookReceiver(t)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such channel", http.StatusNotFound)
	}))
	t.Cleanup(broken.Close)
	run := func(timeout time.Duration, notifiers ...keel.Notifier) *keel.DrillReport {
		h := keel.NewHandlers()
		keel.Handle(h, "t.ok", func(ctx context.Context, task *keel.Task[args]) error { return nil })
		c := e.newClient(keel.Config{Handlers: h, Now: time.Now, Alerts: keel.AlertConfig{
			Interval: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond, Notifiers: notifiers}})
		e.startClient(c)
		defer e.stop(c)
		rep, err := c.Drill(e.ctx, timeout)
		if err != nil {
			t.Fatalf("drill: %v", err)
		}
		if !rep.Cleaned {
			t.Fatal("drill did not clean up")
		}
		tasks, err := c.List(e.ctx, keel.Filter{Type: "keel.drill"})
		if err != nil || len(tasks) != 0 {
			t.Fatalf("drill left %d tasks (%v)", len(tasks), err)
		}
		return rep
	}
	auth := map[string]string{"Authorization": "Bearer hook"}
	// A drill that passes returns as soon as every notifier got it: the
	// long timeout only matters on a loaded machine.
	rep := run(30*time.Second, &keel.WebhookNotifier{ID: "chat", URL: hook.URL, Headers: auth})
	if !rep.Passed || rep.Tasks != 4 || rep.AlertID == 0 || len(rep.Notifiers) != 2 {
		t.Fatalf("drill with a working webhook: %+v", rep)
	}
	for _, n := range rep.Notifiers {
		if !n.Delivered || n.Delay <= 0 || n.Delay > 30*time.Second {
			t.Errorf("notifier %+v", n)
		}
	}
	if got := hook.got(); got["fired type:keel.drill"] != 1 || got["fired all"] != 0 {
		t.Fatalf("webhook got %v: the drill must count against keel.drill only", got)
	}
	rep = run(8*time.Second, &keel.WebhookNotifier{ID: "chat", URL: hook.URL, Headers: auth}, &keel.WebhookNotifier{ID: "pager", URL: broken.URL})
	if rep.Passed {
		t.Fatalf("drill with a broken webhook passed: %+v", rep)
	}
	for _, n := range rep.Notifiers {
		switch n.Name {
		case "pager":
			if n.Delivered || n.Attempts < 1 || n.LastError == "" {
				t.Errorf("broken notifier: %+v", n)
			}
		default:
			if !n.Delivered {
				t.Errorf("working notifier %s not delivered: %+v", n.Name, n)
			}
		}
	}
}
