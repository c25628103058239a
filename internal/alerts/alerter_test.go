package alerts_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/alerts"
	"github.com/keelq/keel/internal/estimator"
	"github.com/keelq/keel/internal/outcome"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  alerts.Store = driver.Driver(nil) // the real drivers fit
	t0              = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

const liveWindow = 30 * time.Second

// store is a fake alerts table. Like the databases it opens one alert per
// rule and subject at a time, and it counts the writes.
type store struct {
	mu                       sync.Mutex
	rows                     []driver.AlertRow // by id, from 1
	fires, updates, resolves int
	listedOpen, listedRecent int
}

func (s *store) ListAlerts(_ context.Context, f driver.AlertFilter) ([]driver.AlertRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Open {
		s.listedOpen++
	} else {
		s.listedRecent++
	}
	var out []driver.AlertRow
	for i := len(s.rows) - 1; i >= 0 && len(out) < f.Limit; i-- {
		if r := s.rows[i]; !f.Open || r.Open() {
			out = append(out, clone(r))
		}
	}
	return out, nil
}

func (s *store) FireAlert(_ context.Context, p driver.FireAlertParams) (*driver.AlertRow, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rows {
		if r.Open() && r.Rule == p.Rule && r.Subject == p.Subject {
			return &r, false, nil
		}
	}
	s.fires++
	r := driver.AlertRow{ID: int64(len(s.rows) + 1), Rule: p.Rule, Subject: p.Subject, Message: p.Message, Hint: p.Hint,
		Values: p.Values, FiredAt: p.Now}
	s.rows = append(s.rows, r)
	return &r, true, nil
}

func (s *store) UpdateAlert(_ context.Context, p driver.UpdateAlertParams) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.rows[p.ID-1]
	if !r.Open() {
		return false, nil
	}
	s.updates++
	r.CurrentMessage, r.CurrentValues, r.CurrentAt = p.Message, p.Values, p.Now
	return true, nil
}

func (s *store) ResolveAlert(_ context.Context, p driver.ResolveAlertParams) (*driver.AlertRow, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.rows[p.ID-1]
	if !r.Open() {
		out := clone(*r)
		return &out, false, nil
	}
	s.resolves++
	r.ResolvedAt, r.ResolvedMessage = p.Now, p.Message
	out := clone(*r)
	return &out, true, nil
}

func (s *store) GetAlert(_ context.Context, id int64) (*driver.AlertRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 1 || int(id) > len(s.rows) {
		return nil, driver.ErrNotFound
	}
	r := clone(s.rows[id-1])
	return &r, nil
}

func (s *store) RecordDelivery(_ context.Context, p driver.DeliveryParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &s.rows[p.AlertID-1]
	d := driver.DeliveryRow{AlertID: p.AlertID, Event: p.Event, Notifier: p.Notifier, LastError: p.Error}
	i := slices.IndexFunc(r.Deliveries, func(x driver.DeliveryRow) bool { return x.Event == p.Event && x.Notifier == p.Notifier })
	if i < 0 {
		r.Deliveries = append(r.Deliveries, d)
		i = len(r.Deliveries) - 1
	}
	r.Deliveries[i].Attempts++
	r.Deliveries[i].LastError = p.Error
	if p.Delivered {
		r.Deliveries[i].DeliveredAt = p.Now
	}
	return nil
}

func (s *store) get(id int64) driver.AlertRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.rows[id-1])
}

func clone(r driver.AlertRow) driver.AlertRow {
	r.Deliveries = slices.Clone(r.Deliveries)
	return r
}

type bundle struct {
	clk     *servicetest.Clock
	drv     *store
	snap    *estimator.Snapshot
	rules   alerts.Rules
	leading bool
	tasks   []alerts.Task    // every Enqueue call
	keys    map[string]bool  // the idempotency keys: one task each
	sent    chan alertsEvent // the hook notifier's calls
	fail    error            // the hook notifier's answer
	cfg     alerts.Config
}

type alertsEvent struct {
	id    int64
	event string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{clk: servicetest.NewClock(t0), drv: &store{}, leading: true, keys: map[string]bool{},
		sent:  make(chan alertsEvent, 100),
		rules: alerts.Rules{DeadPerHour: -1, NodeLost: true},
		snap:  &estimator.Snapshot{At: t0}}
	b.cfg = alerts.Config{
		Driver: b.drv, LiveWindow: liveWindow, RetryMax: time.Minute, Clock: b.clk,
		Enqueue: func(_ context.Context, task alerts.Task) error {
			b.tasks = append(b.tasks, task)
			b.keys[task.Key] = true
			return nil
		},
		Rules:    func(context.Context) (alerts.Rules, error) { return b.rules, nil },
		Snapshot: func(context.Context) (*estimator.Snapshot, error) { return b.snap, nil },
		Leading:  func() bool { return b.leading },
		Notifiers: []alerts.Notifier{{Name: "hook", Notify: func(_ context.Context, a *driver.AlertRow, event string) error {
			b.sent <- alertsEvent{a.ID, event}
			return b.fail
		}}},
	}
	return b
}

// at sets the snapshot to the clock's time, with one node whose last
// heartbeat was silent ago (none when silent is 0).
func (b *bundle) at(silent time.Duration) {
	b.snap = &estimator.Snapshot{At: b.clk.Now()}
	if silent > 0 {
		b.snap.Nodes = []driver.NodeRow{{Name: "n1", Host: "h1", PID: 7, HeartbeatAt: b.clk.Now().Add(-silent)}}
	}
}

// deliveries returns the delivery keys enqueued, sorted.
func (b *bundle) deliveries() []string {
	var out []string
	for k := range b.keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A condition that appears opens an alert once; while it holds, the
// alert's current numbers follow it; once it is gone, the alert resolves
// with the rule's resolution.
func TestFireHoldResolve(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := alerts.New(b.cfg)
	ctx := context.Background()

	b.at(2 * time.Minute)
	a.RunOnce(ctx)
	if b.drv.fires != 1 || len(b.drv.rows) != 1 {
		t.Fatalf("fired %d alerts, want 1", b.drv.fires)
	}
	fired := b.drv.get(1)
	if fired.Rule != alerts.RuleNodeLost || fired.Subject != "node:n1" || !strings.Contains(fired.Message, "for 2m0s") ||
		!fired.FiredAt.Equal(t0) {
		t.Fatalf("fired %+v", fired)
	}

	// It holds with the same numbers: nothing is written.
	a.RunOnce(ctx)
	if b.drv.fires != 1 || b.drv.updates != 0 {
		t.Fatalf("same condition: %d fires, %d updates", b.drv.fires, b.drv.updates)
	}

	// It holds with new numbers: the current ones change, the fired ones stay.
	b.clk.Advance(time.Minute)
	b.at(3 * time.Minute)
	a.RunOnce(ctx)
	if b.drv.fires != 1 || b.drv.updates != 1 {
		t.Fatalf("condition holds: %d fires, %d updates", b.drv.fires, b.drv.updates)
	}
	cur := b.drv.get(1)
	var values map[string]any
	json.Unmarshal(cur.CurrentValues, &values) //nolint:errcheck // checked below
	if cur.Message != fired.Message || !strings.Contains(cur.CurrentMessage, "for 3m0s") || values["silent_seconds"] != float64(180) ||
		!cur.CurrentAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after an update: %+v", cur)
	}
	a.RunOnce(ctx)
	if b.drv.updates != 1 {
		t.Fatalf("the current numbers were written again: %d updates", b.drv.updates)
	}

	// It is gone: the alert resolves, once, saying why.
	b.clk.Advance(time.Minute)
	b.at(0)
	a.RunOnce(ctx)
	a.RunOnce(ctx)
	res := b.drv.get(1)
	if b.drv.resolves != 1 || res.Open() || !res.ResolvedAt.Equal(t0.Add(2*time.Minute)) ||
		res.ResolvedMessage != "node n1 left the node registry (stopped, or pruned after its silence)." {
		t.Fatalf("resolved %d times: %+v", b.drv.resolves, res)
	}

	// It comes back: a new alert.
	b.at(time.Hour)
	a.RunOnce(ctx)
	if again := b.drv.get(2); b.drv.fires != 2 || !again.Open() {
		t.Fatalf("the condition came back: %d fires", b.drv.fires)
	}
}

// Each event of an alert is enqueued for delivery once per notifier (the
// task's key names alert, event and notifier), and no more once a
// delivery was recorded.
func TestDeliveriesOncePerNotifierPerEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := alerts.New(b.cfg)
	ctx := context.Background()
	b.at(2 * time.Minute)
	a.RunOnce(ctx)
	want := []string{"keel.alert:1:fired:hook", "keel.alert:1:fired:log"}
	if got := b.deliveries(); !slices.Equal(got, want) {
		t.Fatalf("deliveries %q, want %q", got, want)
	}
	task := b.tasks[0]
	if task.Type != "keel.notify.log" && task.Type != "keel.notify.hook" || task.MaxAttempts != alerts.DeliveryAttempts {
		t.Fatalf("task %+v", task)
	}

	// The hook's delivery runs and is recorded: later scans leave it be.
	runDelivery(t, a, "hook", 1, driver.AlertFired, 1)
	if got := servicetest.Recv(t, b.sent); got != (alertsEvent{1, driver.AlertFired}) {
		t.Fatalf("hook was told %+v", got)
	}
	b.tasks = nil
	a.RunOnce(ctx)
	for _, task := range b.tasks {
		if task.Type == alerts.NotifyType("hook") {
			t.Fatalf("a recorded delivery was enqueued again: %+v", task)
		}
	}

	b.clk.Advance(time.Minute)
	b.at(0)
	a.RunOnce(ctx)
	want = append(want, "keel.alert:1:resolved:hook", "keel.alert:1:resolved:log")
	slices.Sort(want)
	if got := b.deliveries(); !slices.Equal(got, want) {
		t.Fatalf("deliveries %q, want %q", got, want)
	}
}

// A notifier is not sent the notifier_failing alert about itself.
func TestFailingNotifierNotToldOfItself(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.rules = alerts.Rules{DeadPerHour: -1}
	minute := driver.DueMinute(t0)
	b.snap = &estimator.Snapshot{At: t0,
		Minutes: []driver.MinuteRow{{Minute: minute, Queue: alerts.Queue, Type: alerts.NotifyType("hook"), Ended: 1, Failed: 1, Dead: 1}}}
	alerts.New(b.cfg).RunOnce(context.Background())
	if got := b.drv.get(1); got.Rule != alerts.RuleNotifierFailing || got.Subject != "notifier:hook" {
		t.Fatalf("fired %+v", got)
	}
	if got := b.deliveries(); !slices.Equal(got, []string{"keel.alert:1:fired:log"}) {
		t.Fatalf("deliveries %q", got)
	}
}

// A process that does not lead evaluates nothing, but delivers the
// events of alerts the leader opened and resolved, within ScanWindow.
func TestNotLeadingOnlyDelivers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.leading = false
	ctx := context.Background()
	// The leader fired two alerts and resolved one long ago.
	b.drv.FireAlert(ctx, driver.FireAlertParams{Rule: alerts.RuleNodeLost, Subject: "node:old", Message: "m", Now: t0}) //nolint:errcheck // fake
	b.drv.ResolveAlert(ctx, driver.ResolveAlertParams{ID: 1, Message: "gone", Now: t0})                                 //nolint:errcheck // fake
	b.drv.FireAlert(ctx, driver.FireAlertParams{Rule: alerts.RuleNodeLost, Subject: "node:n1", Message: "m", Now: t0})  //nolint:errcheck // fake
	b.drv.fires, b.drv.resolves = 0, 0
	b.clk.Advance(alerts.ScanWindow + time.Second)
	b.at(0) // the condition is gone, but this process does not judge
	alerts.New(b.cfg).RunOnce(ctx)
	if b.drv.listedOpen != 0 || b.drv.resolves != 0 || b.drv.fires != 0 {
		t.Fatalf("not leading, yet it evaluated: %d open lists, %d resolves, %d fires", b.drv.listedOpen, b.drv.resolves, b.drv.fires)
	}
	if got := b.deliveries(); !slices.Equal(got, []string{"keel.alert:2:fired:hook", "keel.alert:2:fired:log"}) {
		t.Fatalf("deliveries %q: the open alert's, not the old resolution's", got)
	}
}

// A delivery attempt tells the notifier and records the attempt; a
// failure's error is recorded cut to the limit as valid UTF-8; an alert
// that is gone is given up at once.
func TestDeliverRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := alerts.New(b.cfg)
	ctx := context.Background()
	b.drv.FireAlert(ctx, driver.FireAlertParams{Rule: alerts.RuleNodeLost, Subject: "node:n1", Message: "m", Now: t0}) //nolint:errcheck // fake

	b.fail = errors.New(strings.Repeat("é", driver.MaxAlertText))
	if err := runDelivery(t, a, "hook", 1, driver.AlertFired, 1); !errors.Is(err, b.fail) {
		t.Fatalf("delivery error %v", err)
	}
	d := b.drv.get(1).Deliveries
	if len(d) != 1 || d[0].Attempts != 1 || !d[0].DeliveredAt.IsZero() || len(d[0].LastError) > driver.MaxAlertText ||
		!utf8.ValidString(d[0].LastError) || !strings.HasSuffix(d[0].LastError, "…") {
		t.Fatalf("recorded %+v", d)
	}
	b.fail = nil
	b.clk.Advance(time.Second)
	if err := runDelivery(t, a, "hook", 1, driver.AlertFired, 2); err != nil {
		t.Fatal(err)
	}
	if d := b.drv.get(1).Deliveries; d[0].Attempts != 2 || !d[0].DeliveredAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("recorded %+v", d)
	}
	if err := runDelivery(t, a, "hook", 9, driver.AlertFired, 1); !outcome.AsPermanent(err) {
		t.Fatalf("delivery of a missing alert: %v, want permanent", err)
	}
	_, err := a.Handlers()[alerts.DrillType](ctx, &driver.TaskRow{Type: alerts.DrillType})
	if !outcome.AsPermanent(err) {
		t.Fatalf("the drill's task: %v, want permanent", err)
	}
	if p := a.Backoff(); p.Base != time.Second || p.Max != time.Minute {
		t.Fatalf("backoff %+v", p)
	}
}

// runDelivery runs the delivery task of event of alert id to notifier, as
// its attempt.
func runDelivery(t *testing.T, a *alerts.Alerter, notifier string, id int64, event string, attempt int) error {
	t.Helper()
	h := a.Handlers()[alerts.NotifyType(notifier)]
	if h == nil {
		t.Fatalf("no handler for notifier %s", notifier)
	}
	payload := fmt.Sprintf(`{"alert_id":%d,"event":%q}`, id, event)
	_, err := h(context.Background(), &driver.TaskRow{Type: alerts.NotifyType(notifier), Payload: json.RawMessage(payload),
		Attempt: attempt, MaxAttempts: alerts.DeliveryAttempts})
	return err
}

func TestInsertParams(t *testing.T) {
	t.Parallel()
	p, err := alerts.Task{Type: alerts.DrillType, Payload: map[string]any{"n": 1}, Key: "k", MaxAttempts: 1, Timeout: time.Second}.InsertParams(t0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Queue != alerts.Queue || p.Type != alerts.DrillType || string(p.Payload) != `{"n":1}` || p.IdemKey == "" ||
		!p.RunAt.Equal(t0) || p.MaxAttempts != 1 || p.Timeout != time.Second {
		t.Fatalf("params %+v", p)
	}
	if p, _ := (alerts.Task{Type: alerts.DrillType}).InsertParams(t0); p.IdemKey != "" {
		t.Fatalf("a task without a key has idempotency key %q", p.IdemKey)
	}
}
