package drivertest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelq/keel"
	"github.com/keelq/keel/metrics"
)

// testEngineKeelWorkApart: keel's own work next to a user's tasks — alert
// deliveries to a webhook on a closed port, enqueued again while keel's
// queue is paused (idempotency hits), then retried until given up (dead
// letters) — counts in no user figure: Stats, History, Counts, Latency,
// the dead_per_hour alerts and the metrics' task series count the user's
// tasks alone, while Stats.Keel and the keel_internal_ metrics show
// keel's. notifier_failing fires for the webhook, logged at WARN and not
// sent to the webhook itself.
func testEngineKeelWorkApart(t *testing.T, e *env) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/hook"
	l.Close() // nothing listens: every delivery is refused

	h := keel.NewHandlers()
	keel.Handle(h, "t.ok", func(ctx context.Context, task *keel.Task[args]) error { return nil })
	keel.Handle(h, "t.fail", func(ctx context.Context, task *keel.Task[args]) error {
		return keel.Permanent(errors.New("provider down"))
	})
	logs := &syncBuffer{}
	rules := keel.AlertRules{DeadPerHour: 0} // one dead letter fires; the other rules off
	c := e.newClient(keel.Config{Handlers: h, Now: time.Now,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(e.t.Output(), logs), nil)),
		Alerts: keel.AlertConfig{Rules: &rules, Interval: 50 * time.Millisecond, RetryMax: 20 * time.Millisecond,
			Notifiers: []keel.Notifier{&keel.WebhookNotifier{ID: "hook", URL: closed}}}})
	m, err := metrics.New(metrics.Options{StatsInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Watch(c); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)

	// keel's queue paused: its deliveries wait, and every alert round
	// enqueues them again, deduplicated by their idempotency keys.
	pause := func(p bool) {
		if _, err := c.UpdateQueue(e.ctx, keel.ReservedQueue, keel.QueueUpdate{Paused: &p}); err != nil {
			t.Fatal(err)
		}
	}
	pause(true)
	// The user's work: 2 tasks, 2 duplicates of them (2 hits), 1 dead.
	for _, key := range []string{"a", "b", "a", "b"} {
		if _, err := c.Enqueue(e.ctx, "t.ok", args{}, keel.IdempotencyKey(key)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Enqueue(e.ctx, "t.fail", args{}); err != nil {
		t.Fatal(err)
	}
	e.startClient(c)
	stats := func() *keel.Stats {
		st, err := c.Stats(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	waitFor(t, "keel's deliveries enqueued again while its queue is paused", func() bool {
		st := stats()
		return st.Keel.HitsLastHour >= 4 && st.Counts[keel.StateSucceeded] == 2 && st.Counts[keel.StateDead] == 1
	})
	pause(false)
	// Each fired alert's delivery to the webhook fails 50 times and is
	// given up.
	deadline := time.Now().Add(90 * time.Second)
	for st := stats(); st.Keel.DeliveriesDead < 2; st = stats() {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries not given up: %+v", st.Keel)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var failing *keel.Alert
	waitFor(t, "notifier_failing firing for the webhook", func() bool {
		as, err := c.Alerts(e.ctx, keel.AlertFilter{Rule: keel.RuleNotifierFailing, Firing: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(as) == 1 && delivery(as[0], "fired", "log") != nil {
			failing = as[0]
			return true
		}
		return false
	})
	if failing.Subject != "notifier:hook" || failing.Values["dead"] == nil || failing.Hint == "" {
		t.Errorf("notifier_failing: %+v", failing)
	}
	if d := delivery(failing, "fired", "hook"); d != nil {
		t.Errorf("the failing webhook was sent its own notifier_failing alert: %+v", d)
	}
	if !slices.ContainsFunc(strings.Split(logs.String(), "\n"), func(line string) bool {
		return strings.Contains(line, "level=WARN") && strings.Contains(line, `msg="keel: alert fired"`) &&
			strings.Contains(line, "rule=notifier_failing")
	}) {
		t.Error("no WARN record of notifier_failing firing")
	}

	// The user's figures: 2 succeeded, 1 dead, 2 hits; no queue "keel".
	st := stats()
	var names []string
	for _, q := range st.Queues {
		names = append(names, q.Name)
	}
	if !slices.Equal(names, []string{keel.DefaultQueue}) {
		t.Errorf("Stats.Queues %v, want only %s", names, keel.DefaultQueue)
	}
	if st.Counts[keel.StateSucceeded] != 2 || st.Counts[keel.StateDead] != 1 || st.Counts[keel.StatePending] != 0 || st.DeadLastHour != 1 {
		t.Errorf("Stats counts %v, dead last hour %d: want 2 succeeded, 1 dead, 1 dead this hour", st.Counts, st.DeadLastHour)
	}
	k := st.Keel
	if k.Name != keel.ReservedQueue || k.Counts[keel.StateDead] < 2 || k.DeadLastHour < 2 || k.DeliveriesDead < 2 ||
		k.HitsLastHour < 4 || k.FailedLastHour < 100 || len(k.Types) == 0 {
		t.Errorf("Stats.Keel %+v", k)
	}
	hist, err := c.History(e.ctx, time.Now().Add(-time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var hour keel.HistoryPoint
	for _, p := range hist {
		hour.Enqueued += p.Enqueued
		hour.Hits += p.Hits
		hour.Ended += p.Ended
		hour.Failed += p.Failed
		hour.Dead += p.Dead
	}
	if hour.Enqueued != 3 || hour.Hits != 2 || hour.Ended != 3 || hour.Failed != 1 || hour.Dead != 1 {
		t.Errorf("History over the hour %+v: want 3 enqueued, 2 hits, 3 ended, 1 failed, 1 dead", hour)
	}
	counts, err := c.Counts(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := counts[keel.ReservedQueue]; ok || len(counts) != 1 {
		t.Errorf("Counts %v: keel's queue counted", counts)
	}
	lat, err := c.Latency(e.ctx, keel.LatencyParams{})
	if err != nil {
		t.Fatal(err)
	}
	if lat.Sample != 3 || len(lat.Queues) != 1 || lat.Queues[0].Queue != keel.DefaultQueue {
		t.Errorf("Latency sample %d, queues %+v: want the user's 3 tasks in %s", lat.Sample, lat.Queues, keel.DefaultQueue)
	}
	dead, err := c.Alerts(e.ctx, keel.AlertFilter{Rule: keel.RuleDeadPerHour})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range dead {
		if a.Subject != "all" && a.Subject != "type:t.fail" {
			t.Errorf("dead_per_hour fired for %s", a.Subject)
		}
		if a.Values["dead"] != float64(1) {
			t.Errorf("dead_per_hour %s counts %v dead letters, want the user's 1", a.Subject, a.Values["dead"])
		}
	}

	// The metrics: the task series count the user's tasks; keel's are in
	// the keel_internal_ families.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]map[string]float64{}
	for _, mf := range mfs {
		series[mf.GetName()] = map[string]float64{}
		for _, s := range mf.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount())
			series[mf.GetName()][strings.Join(labels, ",")] = v
		}
	}
	for _, name := range []string{"keel_tasks", "keel_oldest_ready_age_seconds", "keel_attempts_total", "keel_attempt_duration_seconds",
		"keel_pickup_latency_seconds", "keel_tasks_finished_total", "keel_outcome_commit_seconds"} {
		for labels := range series[name] {
			if !strings.Contains(labels, "queue="+keel.DefaultQueue) {
				t.Errorf("%s{%s}: a series of keel's own work", name, labels)
			}
		}
	}
	if got := series["keel_tasks"]["queue=default,state=dead"]; got != 1 {
		t.Errorf("keel_tasks{queue=default,state=dead} = %v, want 1", got)
	}
	// Every handled type has a series from the start (t.fail's stays 0).
	if got := series["keel_idempotency_hits_total"]; len(got) > 2 || got["queue=default,type=t.ok"] != 2 ||
		got["queue=default,type=t.fail"] != 0 {
		t.Errorf("keel_idempotency_hits_total %v: want the user's 2 of t.ok, 0 of t.fail", got)
	}
	if got := series["keel_attempts_per_task"]; len(got) != 2 {
		t.Errorf("keel_attempts_per_task %v: want t.ok and t.fail only", got)
	}
	if got := series["keel_internal_attempts_total"]["outcome=error,type=keel.notify.hook"]; got < 100 {
		t.Errorf("keel_internal_attempts_total{type=keel.notify.hook,outcome=error} = %v, want at least 100", got)
	}
	if got := series["keel_internal_tasks"]["state=dead"]; got < 2 {
		t.Errorf("keel_internal_tasks{state=dead} = %v, want at least 2", got)
	}
}
