package dashboard

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// TestKeelWorkApart: keel's own work — alert deliveries to a webhook on a
// closed port, enqueued again while keel's queue is paused, then retried
// until given up — is in the overview's and the nodes page's "keel's own
// work" section, and in none of the user's figures: the tiles, the queue
// and pickup tables, the backlog curve.
func TestKeelWorkApart(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		ctx := t.Context()
		deadLetters(t, b, 1) // the user's one dead letter: dead_per_hour fires at 0
		// The user's 2 pending tasks, each enqueued twice: 2 hits.
		for _, key := range []string{"k1", "k2", "k1", "k2"} {
			if _, err := b.client.Enqueue(ctx, typeReport, json.RawMessage(`{}`), keel.Queue("reports"), keel.IdempotencyKey(key)); err != nil {
				t.Fatal(err)
			}
		}
		paused := true
		if _, err := b.client.UpdateQueue(ctx, keel.ReservedQueue, keel.QueueUpdate{Paused: &paused}); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + l.Addr().String() + "/hook"
		l.Close()
		rules := keel.AlertRules{DeadPerHour: 0}
		w, err := keel.NewClient(keel.Config{Driver: b.drv, Handlers: keel.NewHandlers(), Logger: b.log, PollInterval: 20 * time.Millisecond,
			Alerts: keel.AlertConfig{Rules: &rules, Interval: 50 * time.Millisecond, RetryMax: 10 * time.Millisecond,
				Notifiers: []keel.Notifier{&keel.WebhookNotifier{ID: "hook", URL: closed}}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w.Stop(sctx) //nolint:errcheck // always nil
		})
		figure := func(body, id string) int64 {
			t.Helper()
			m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `">([0-9,]+)<`).FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("no figure %s in the page", id)
			}
			n, _ := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
			return n
		}
		live := func() string {
			t.Helper()
			r := b.do(t, "GET", "/live", "", nil)
			if r.status != http.StatusOK {
				t.Fatalf("/live: %d %s", r.status, r.body)
			}
			return r.body
		}
		// While keel's queue is paused its deliveries wait and are enqueued
		// again every round: keel's hits, not the user's.
		deadline := time.Now().Add(30 * time.Second)
		body := live()
		for figure(body, "keel-hits") < 4 {
			if time.Now().After(deadline) {
				t.Fatalf("keel's deliveries not enqueued again:\n%s", body)
			}
			time.Sleep(50 * time.Millisecond)
			body = live()
		}
		if figure(body, "hour-hits") != 2 || figure(body, "backlog") != 2 || figure(body, "count-dead") != 1 {
			t.Errorf("user tiles: hits %d, backlog %d, dead %d; want 2, 2, 1", figure(body, "hour-hits"), figure(body, "backlog"), figure(body, "count-dead"))
		}
		if !regexp.MustCompile(`<tr id="keel-all"><td><strong>queue keel</strong></td><td class="n">[1-9]`).MatchString(body) {
			t.Errorf("keel's section shows no ready deliveries:\n%s", body)
		}
		r := b.do(t, "GET", "/history.json?range=hour", "", nil)
		var chart struct {
			Backlog  []int64   `json:"backlog"`
			Enqueued []float64 `json:"enqueued"`
		}
		if err := json.Unmarshal([]byte(r.body), &chart); err != nil || len(chart.Backlog) == 0 {
			t.Fatalf("history.json: %v %s", err, r.body)
		}
		var enqueued float64
		for _, n := range chart.Enqueued {
			enqueued += n
		}
		if last := chart.Backlog[len(chart.Backlog)-1]; last != 2 || enqueued != 3 {
			t.Errorf("chart: backlog now %d, enqueued in the hour %v; want the user's 2 and 3", last, enqueued)
		}

		// Let the deliveries run: the webhook's fail until given up.
		paused = false
		if _, err := b.client.UpdateQueue(ctx, keel.ReservedQueue, keel.QueueUpdate{Paused: &paused}); err != nil {
			t.Fatal(err)
		}
		deadline = time.Now().Add(90 * time.Second)
		for body = live(); figure(body, "keel-given-up") < 2; body = live() {
			if time.Now().After(deadline) {
				t.Fatalf("deliveries not given up:\n%s", body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if figure(body, "hour-hits") != 2 || figure(body, "count-dead") != 1 || figure(body, "backlog") != 2 {
			t.Errorf("user tiles after keel's dead letters: hits %d, dead %d, backlog %d; want 2, 1, 2",
				figure(body, "hour-hits"), figure(body, "count-dead"), figure(body, "backlog"))
		}
		for _, bad := range []string{`id="queue-keel"`, `id="latency-keel"`} {
			if strings.Contains(body, bad) {
				t.Errorf("overview shows %s", bad)
			}
		}
		if !strings.Contains(body, "1 of 1 attempts") { // the user's one attempt, which failed
			t.Errorf("failure rate: not the user's 1 of 1 attempts:\n%s", body)
		}
		if !strings.Contains(body, `id="queue-reports"`) || !strings.Contains(body, `id="keel-type-keel.notify.hook"`) ||
			figure(body, "keel-failed") < 100 {
			t.Errorf("overview: no reports queue, no keel.notify.hook row or too few failed attempts:\n%s", body)
		}
		checkPage(t, "/", b.do(t, "GET", "/", "", nil))
		if q := b.do(t, "GET", "/queues", "", nil); q.status != http.StatusOK || strings.Contains(q.body, `id="q-keel"`) ||
			!strings.Contains(q.body, `id="q-reports"`) {
			t.Errorf("/queues: keel's queue listed among the user's, or no reports queue (status %d)", q.status)
		}
		nodes := b.do(t, "GET", "/nodes", "", nil)
		checkPage(t, "/nodes", nodes)
		if nodes.status != http.StatusOK || !strings.Contains(nodes.body, `id="node-table"`) || !strings.Contains(nodes.body, `id="keel-work"`) ||
			figure(nodes.body, "keel-given-up") < 2 || !strings.Contains(nodes.body, `id="keel-type-keel.notify.hook"`) {
			t.Errorf("/nodes: no node table or keel section with the given-up deliveries:\n%s", nodes.body)
		}
		alerts := b.do(t, "GET", "/alerts", "", nil)
		if !strings.Contains(alerts.body, "notifier_failing") || !strings.Contains(alerts.body, "notifier:hook") {
			t.Errorf("/alerts: no notifier_failing for the webhook")
		}
	})
}
