package dashboard

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	"github.com/keelq/keel/driver"
)

// tableOverflow lists, for every visible table, where it is wider than the
// scrolling box or panel that holds it ("" when none is): at desktop width
// no table may need sideways scrolling.
const tableOverflow = `Array.from(document.querySelectorAll("table")).filter(function (t) { return t.offsetParent !== null; }).map(function (t) {
	var box = t.closest(".scroll") || t.closest(".panel") || t.parentElement;
	var inner = box.clientWidth - parseFloat(getComputedStyle(box).paddingLeft) - parseFloat(getComputedStyle(box).paddingRight);
	if (t.scrollWidth <= inner + 0.5 && box.scrollWidth <= box.clientWidth) { return ""; }
	return "#" + (t.id || "(table)") + " is " + t.scrollWidth + " px wide in a box of " + inner + " px";
}).filter(Boolean).join("; ")`

// seedBusy adds what a busy installation shows on every page on top of
// seed: more tasks of several types and queues, queue and type limits,
// alerts with failed and delivered notifications, a second schedule, a
// sampled backlog peak and a live node.
func seedBusy(t *testing.T, b *bundle) {
	t.Helper()
	ctx := t.Context()
	for i := range 30 {
		typ, q := typeReport, "reports"
		if i%3 == 0 {
			typ, q = typeMail, "mail-outbound-priority"
		}
		if _, err := b.client.Enqueue(ctx, typ, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), keel.Queue(q)); err != nil {
			t.Fatal(err)
		}
	}
	conc, rate, burst := 250, 1234.5, 5000
	for _, q := range []string{"reports", "mail-outbound-priority", keel.DefaultQueue} {
		if _, err := b.client.UpdateQueue(ctx, q, keel.QueueUpdate{Concurrency: &conc, Rate: &rate, Burst: &burst}); err != nil {
			t.Fatal(err)
		}
	}
	timeout, tries := 90*time.Second, 25
	if _, err := b.client.UpdateType(ctx, typeReport, keel.TypeUpdate{Concurrency: &conc, Rate: &rate, Burst: &burst, Timeout: &timeout, MaxAttempts: &tries}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, rule := range []string{"oldest_ready_age", "failure_ratio", "node_lost"} {
		a, _, err := b.drv.FireAlert(ctx, driver.FireAlertParams{Rule: rule, Subject: "queue:mail-outbound-priority",
			Message: "the oldest ready task in queue mail-outbound-priority has waited at least 12m0s (the rule fires above 5m0s); 1234 tasks are ready.",
			Hint:    "keel stats; keel nodes; keel queue list (is queue mail-outbound-priority paused, or are its workers busy or gone?)", Now: now.Add(time.Duration(i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []driver.DeliveryParams{
			{AlertID: a.ID, Event: "fired", Notifier: "ops-slack-webhook", Error: `POST https://hooks.slack.example.com/services/T000/B000/XXXX: 503 Service Unavailable: upstream connect error or disconnect/reset before headers`, Now: now},
			{AlertID: a.ID, Event: "fired", Notifier: "pagerduty-primary", Delivered: true, Now: now},
			{AlertID: a.ID, Event: "fired", Notifier: "email-oncall", Error: "dial tcp 10.0.0.12:587: connect: connection refused", Now: now},
		} {
			if err := b.drv.RecordDelivery(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.drv.UpsertSchedules(ctx, []driver.ScheduleParams{{Name: "hourly-digest-for-every-customer", Spec: "*/15 * * * *", TimeZone: "America/Argentina/Buenos_Aires",
		Type: typeMail, Queue: "mail-outbound-priority", Payload: json.RawMessage(`{"digest":"hourly","customers":"all"}`), Missed: driver.MissedSkip, Now: now}}); err != nil {
		t.Fatal(err)
	}
	// What the leader's sampler keeps: the burst's peak in this minute.
	if err := b.drv.(driver.BacklogStore).RecordBacklog(ctx, driver.BacklogSample{Minute: driver.DueMinute(now), Pending: 80}); err != nil {
		t.Fatal(err)
	}
	if err := b.drv.RegisterNode(ctx, driver.NodeParams{Name: "worker-eu-central-1a-7f9c", Host: "ip-10-0-12-34.eu-central-1.compute.internal", PID: 4242,
		Queues: []string{keel.DefaultQueue, "reports", "mail-outbound-priority"}, StartedAt: now.Add(-time.Hour), Now: now,
		Workers: map[string]int{keel.DefaultQueue: 10, "reports": 4, "mail-outbound-priority": 32}, Version: "v0.0.0-test", Running: 3}); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserLayout opens every page with a busy installation's data: at
// 1280×800 no table is wider than its panel, and at 390 px (a phone) the
// page does not scroll sideways, the menu that scrolls instead shows that
// it does, and a screenshot of each page is kept.
func TestBrowserLayout(t *testing.T) {
	br := newBrowser(t)
	b := browserServer(t)
	s := seed(t, b, 2)
	seedBusy(t, b)
	fin := finishedBatch(t, b)
	open, _, err := batch.Enqueue(t.Context(), b.client, batch.Spec{Open: true, Tasks: []keel.TaskSpec{
		{Type: typeReport, Payload: json.RawMessage(`{"n":1}`), Options: []keel.Option{keel.Queue("reports")}}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := screenshotDir(t)
	br.login(t, b.srv.URL, adminToken)

	pages := []struct{ name, path, sel string }{
		{"overview", "/", "#backlog"},
		{"queues", "/queues", "#queue-table"},
		{"tasks", "/tasks", "#task-table"},
		{"task", fmt.Sprintf("/tasks/%d", s.pending), "#task-payload"},
		{"task-dead", fmt.Sprintf("/tasks/%d", s.dead[0]), "#task-state"},
		{"batches", "/batches", "#batch-table"},
		{"batch", fmt.Sprintf("/batches/%d", fin.ID), "#member-table"},
		{"batch-open", fmt.Sprintf("/batches/%d", open.ID), "#member-table"},
		{"dead", "/dead", "#dead-group-table"},
		{"alerts", "/alerts", "#alert-table"},
		{"nodes", "/nodes", "#nav-nodes"},
		{"schedules", "/schedules", "#s-nightly"},
		{"sources", "/sources", fmt.Sprintf("#rejected-%d", s.rejected)},
		{"rejected", fmt.Sprintf("/rejected/%d", s.rejected), "#rejected-body"},
	}
	for _, p := range pages {
		br.do(t, p.name, chromedp.Navigate(b.srv.URL+p.path), chromedp.WaitVisible(p.sel))
		if n := br.eval(t, `document.querySelectorAll("table").length`); n == 0 && p.name != "nodes" && p.name != "task" && p.name != "task-dead" && p.name != "rejected" {
			t.Errorf("%s: no table on the page", p.path)
		}
		if got := br.evalString(t, tableOverflow); got != "" {
			t.Errorf("%s at 1280 px: %s", p.path, got)
		}
		br.screenshot(t, dir, "layout-"+p.name)
	}

	br.do(t, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	for _, p := range pages {
		br.do(t, p.name, chromedp.Navigate(b.srv.URL+p.path), chromedp.WaitVisible(p.sel))
		if w := br.eval(t, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s at phone width: the page is %v px wide in a 390 px screen", p.path, w)
		}
		br.screenshot(t, dir, "layout-"+p.name+"-phone")
	}
	// The menu is wider than the phone: its right edge fades out while
	// more of it lies to the right, and the fade goes once it is scrolled
	// to the end.
	br.do(t, "overview", chromedp.Navigate(b.srv.URL+"/"), chromedp.WaitVisible("#nav"))
	if w, c := br.eval(t, `document.getElementById("nav").scrollWidth`), br.eval(t, `document.getElementById("nav").clientWidth`); w <= c {
		t.Fatalf("the menu is %v px wide in %v px: nothing to scroll, nothing to check", w, c)
	}
	// The mask's last stop is transparent while the right edge fades.
	mask := `getComputedStyle(document.getElementById("nav")).maskImage || getComputedStyle(document.getElementById("nav")).webkitMaskImage || "none"`
	fadesRight := func(m string) bool {
		return strings.HasSuffix(m, "rgba(0, 0, 0, 0))") || strings.HasSuffix(m, "transparent)")
	}
	if got := br.evalString(t, mask); !fadesRight(got) {
		t.Errorf("the menu scrolls sideways with no hint at its right edge: mask %q", got)
	}
	br.eval(t, `(function () { var n = document.getElementById("nav"); n.scrollLeft = n.scrollWidth; return n.scrollLeft; })()`)
	time.Sleep(300 * time.Millisecond) // the scroll event
	if got := br.evalString(t, mask); fadesRight(got) || !strings.Contains(got, "gradient") {
		t.Errorf("the menu, scrolled to its end, should fade at the left edge only: mask %q", got)
	}
}
