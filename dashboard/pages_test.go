package dashboard

import (
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// checkPage checks what every HTML page must have: the CSP and the other
// security headers, and no unescaped hostile string.
func checkPage(t *testing.T, what string, r response) {
	t.Helper()
	if got := r.header.Get("Content-Security-Policy"); got != CSP {
		t.Errorf("%s: Content-Security-Policy %q, want %q", what, got, CSP)
	}
	if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Referrer-Policy") != "same-origin" {
		t.Errorf("%s: missing nosniff or Referrer-Policy: %v", what, r.header)
	}
	for _, bad := range []string{"<script>alert", "<b>look</b>", " style=", "onclick", "onload"} {
		if strings.Contains(r.body, bad) {
			t.Errorf("%s: body contains %q unescaped", what, bad)
		}
	}
	if strings.Contains(r.body, "<script>") {
		t.Errorf("%s: an inline <script> block", what)
	}
}

// TestPages renders every page for every role on SQLite and PostgreSQL,
// with hostile strings in a payload, an error and an alert.
func TestPages(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		s := seed(t, b, 2)
		pages := []string{"/", "/live", "/queues", "/tasks", "/tasks?state=dead&type=mail.send&queue=default",
			"/tasks?after=2020-01-01T00:00&before=2099-01-01", fmt.Sprintf("/tasks/%d", s.pending), fmt.Sprintf("/tasks/%d", s.dead[0]),
			"/dead", "/dead?type=mail.send", "/batches", "/batches?unfinished=1", "/alerts", "/nodes", "/schedules", "/sources", "/sources?source=orders&open=true",
			fmt.Sprintf("/rejected/%d", s.rejected)}
		for _, tok := range []string{adminToken, readToken, enqueueToken} {
			for _, p := range pages {
				r := b.do(t, "GET", p, tok, nil)
				if r.status != http.StatusOK {
					t.Errorf("%s as %s: status %d: %s", p, tok, r.status, r.body)
					continue
				}
				checkPage(t, p, r)
				hasForms := strings.Contains(r.body, `method="post" action="/queues/`) || strings.Contains(r.body, `id="task-retry"`) ||
					strings.Contains(r.body, `id="task-cancel"`) || strings.Contains(r.body, `id="dead-selected"`) ||
					strings.Contains(r.body, `action="/schedules/`) || strings.Contains(r.body, `action="/rejected/`)
				if tok != adminToken && hasForms {
					t.Errorf("%s as %s shows action forms", p, tok)
				}
			}
		}
		// The hostile strings are there, escaped.
		for p, want := range map[string]string{
			fmt.Sprintf("/tasks/%d", s.pending):     "&lt;script&gt;alert(1)&lt;/script&gt;",
			fmt.Sprintf("/tasks/%d", s.dead[0]):     "&lt;script&gt;alert(2)&lt;/script&gt; refused",
			"/dead":                                 "&lt;script&gt;alert(2)&lt;/script&gt; refused",
			"/alerts":                               "&lt;script&gt;alert(3)&lt;/script&gt; fired",
			"/":                                     "&lt;script&gt;alert(3)&lt;/script&gt; fired",
			"/sources":                              "&lt;script&gt;alert(6)&lt;/script&gt; rejected",
			fmt.Sprintf("/rejected/%d", s.rejected): "&lt;script&gt;alert(1)&lt;/script&gt;",
		} {
			if r := b.do(t, "GET", p, readToken, nil); !strings.Contains(r.body, want) {
				t.Errorf("%s: no %q in the page", p, want)
			}
		}
		// The pending task's idempotency key, escaped.
		if r := b.do(t, "GET", fmt.Sprintf("/tasks/%d", s.pending), readToken, nil); !strings.Contains(r.body,
			`<dd id="task-key"><code>&lt;script&gt;alert(7)&lt;/script&gt; order-42</code></dd>`) {
			t.Errorf("pending task page: no idempotency key")
		}
		// The dead task's steps, its hostile step name escaped; the pending
		// task has none.
		if r := b.do(t, "GET", fmt.Sprintf("/tasks/%d", s.dead[0]), readToken, nil); !strings.Contains(r.body, `id="task-steps"`) ||
			!strings.Contains(r.body, "<td>&lt;script&gt;alert(5)&lt;/script&gt; step</td><td>1</td>") {
			t.Errorf("dead task page: no steps table with the escaped step:\n%s", r.body)
		}
		if r := b.do(t, "GET", fmt.Sprintf("/tasks/%d", s.pending), readToken, nil); strings.Contains(r.body, `id="task-steps"`) {
			t.Errorf("pending task page shows a steps table")
		}
		// Admin sees the actions.
		if r := b.do(t, "GET", fmt.Sprintf("/tasks/%d", s.dead[0]), adminToken, nil); !strings.Contains(r.body, `id="task-retry"`) {
			t.Errorf("dead task page shows admin no retry button")
		}
		if r := b.do(t, "GET", fmt.Sprintf("/tasks/%d", s.pending), adminToken, nil); !strings.Contains(r.body, `id="task-cancel"`) || !strings.Contains(r.body, `id="task-eta"`) {
			t.Errorf("pending task page shows admin no cancel button or no ETA")
		}
		// The overview's backlog: the one pending task.
		if r := b.do(t, "GET", "/live", readToken, nil); !strings.Contains(r.body, `<span class="big" id="backlog">1</span>`) {
			t.Errorf("live overview: no backlog 1 in %s", r.body)
		}
		// The pending task is ready for less than a minute: its oldest
		// ready age shows as <1m, not as none.
		for _, p := range []string{"/", "/queues"} {
			if r := b.do(t, "GET", p, readToken, nil); !strings.Contains(r.body, `<td class="n">&lt;1m</td>`) {
				t.Errorf("%s: no oldest ready age <1m for the ready task", p)
			}
		}
		// The chart data.
		for _, rg := range []string{"hour", "day", "week"} {
			r := b.do(t, "GET", "/history.json?range="+rg, readToken, nil)
			if r.status != http.StatusOK || !strings.Contains(r.body, `"backlog":[`) {
				t.Errorf("history.json?range=%s: %d %s", rg, r.status, r.body)
			}
		}
		// Errors in words.
		for p, want := range map[string]int{"/tasks/999999": 404, "/tasks/abc": 400, "/nope": 404, "/tasks?state=weird": 400, "/tasks?after=yesterday": 400} {
			r := b.do(t, "GET", p, readToken, nil)
			if r.status != want || !strings.Contains(r.body, `id="error-message"`) {
				t.Errorf("%s: status %d, want %d with an error message: %s", p, r.status, want, r.body)
			}
			checkPage(t, p, r)
		}
	})
}

// TestEmptyStates checks that an empty database explains itself.
func TestEmptyStates(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{})
	for p, want := range map[string]string{
		"/dead": "No dead letters", "/alerts": "No alerts", "/nodes": "No worker process is registered",
		"/tasks": "No tasks match", "/": "No queues yet", "/schedules": "No schedules",
		"/sources": "No source has reported", "/batches": "No batches",
	} {
		r := b.do(t, "GET", p, "", nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, want) {
			t.Errorf("%s: status %d, no %q", p, r.status, want)
		}
	}
}

// actions are every POST a page makes, for a seeded database.
func actions(s seeded) []struct {
	path string
	form url.Values
} {
	return []struct {
		path string
		form url.Values
	}{
		{"/queues/reports", url.Values{"op": {"pause"}}},
		{"/queues/reports", url.Values{"concurrency": {"3"}}},
		{"/types/report.build", url.Values{"op": {"pause"}}},
		{"/types/report.build", url.Values{"timeout": {"45s"}, "max_attempts": {"7"}}},
		{fmt.Sprintf("/tasks/%d/cancel", s.pending), url.Values{}},
		{fmt.Sprintf("/tasks/%d/retry", s.dead[0]), url.Values{}},
		{"/dead/selected", url.Values{"action": {"requeue"}, "id": {fmt.Sprint(s.dead[1])}}},
		{"/dead/selected", url.Values{"action": {"purge"}, "force": {"yes"}, "id": {fmt.Sprint(s.dead[2])}}},
		{"/dead/matching", url.Values{"action": {"purge"}, "force": {"yes"}, "confirm": {"yes"}}},
		{"/dead/matching", url.Values{"action": {"requeue"}, "confirm": {"yes"}}},
		{"/schedules/nightly", url.Values{"op": {"pause"}}},
		{"/schedules/nightly", url.Values{"op": {"trigger"}}},
		{fmt.Sprintf("/rejected/%d/resubmit", s.rejected), url.Values{"payload": {`{"order_id":"x"}`}}},
		{fmt.Sprintf("/rejected/%d/delete", s.rejected), url.Values{"confirm": {"yes"}}},
	}
}

// TestActionsRefused: read and enqueue tokens are refused every action,
// and nothing changes.
func TestActionsRefused(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		s := seed(t, b, 4)
		before, err := b.client.Counts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range actions(s) {
			for _, tok := range []string{readToken, enqueueToken} {
				r := b.do(t, "POST", a.path, tok, a.form)
				if r.status != http.StatusForbidden || !strings.Contains(r.body, "needs an admin token") {
					t.Errorf("POST %s %v as %s: status %d, want 403: %s", a.path, a.form, tok, r.status, r.body)
				}
				checkPage(t, a.path, r)
			}
			if r := b.do(t, "POST", a.path, "", a.form); r.status != http.StatusUnauthorized {
				t.Errorf("POST %s without a session: status %d, want 401", a.path, r.status)
			}
		}
		after, err := b.client.Counts(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(before) != fmt.Sprint(after) {
			t.Errorf("refused actions changed the counts: %v, then %v", before, after)
		}
		qs, err := b.client.Queues(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if q.Paused || q.Concurrency != 0 {
				t.Errorf("refused actions changed queue %s: %+v", q.Name, q)
			}
		}
	})
}

// TestActionsAdmin: every action works for admin and changes the database.
func TestActionsAdmin(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		s := seed(t, b, 5)
		ctx := t.Context()
		post := func(path string, form url.Values, want int) response {
			t.Helper()
			r := b.do(t, "POST", path, adminToken, form)
			if r.status != want {
				t.Fatalf("POST %s %v: status %d, want %d: %s", path, form, r.status, want, r.body)
			}
			return r
		}
		state := func(id int64) keel.State {
			t.Helper()
			ti, err := b.client.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return ti.State
		}

		r := post("/queues/reports", url.Values{"op": {"pause"}}, http.StatusSeeOther)
		if loc := r.header.Get("Location"); loc != "/queues?done=queue&n=reports" {
			t.Errorf("after pause: Location %q", loc)
		}
		if r := b.do(t, "GET", "/queues?done=queue&n=reports", adminToken, nil); !strings.Contains(r.body, `<p class="flash good" id="done">Queue reports updated`) {
			t.Errorf("no message after pause")
		}
		for _, q := range []string{"?done=Your+account+is+locked", "?done=queue&n=%3Cb%3Ehi", "?done=queue&n=call+us"} {
			if r := b.do(t, "GET", "/queues"+q, adminToken, nil); strings.Contains(r.body, `id="done"`) {
				t.Errorf("/queues%s shows a message", q)
			}
		}
		post("/queues/reports", url.Values{"concurrency": {"3"}}, http.StatusSeeOther)
		qs, _ := b.client.Queues(ctx)
		for _, q := range qs {
			if q.Name == "reports" && (!q.Paused || q.Concurrency != 3) {
				t.Errorf("queue reports after pause and concurrency 3: %+v", q)
			}
		}
		post("/queues/reports", url.Values{"op": {"resume"}}, http.StatusSeeOther)
		post("/queues/reports", url.Values{"concurrency": {"-1"}}, http.StatusBadRequest)
		post("/types/report.build", url.Values{"op": {"pause"}}, http.StatusSeeOther)
		post("/types/report.build", url.Values{"timeout": {"45s"}, "max_attempts": {"7"}, "backoff_base": {"2s"}, "backoff_max": {"1m"}}, http.StatusSeeOther)
		post("/types/report.build", url.Values{"timeout": {"soon"}}, http.StatusBadRequest)
		post("/types/report.build", url.Values{"concurrency": {"2"}, "rate": {"12.5"}, "burst": {"4"}}, http.StatusSeeOther)
		post("/queues/reports", url.Values{"rate": {"30"}}, http.StatusSeeOther)
		for _, bad := range []url.Values{{"rate": {"-1"}}, {"rate": {"NaN"}}, {"rate": {"fast"}}, {"burst": {"-3"}}} {
			post("/types/report.build", bad, http.StatusBadRequest)
		}
		post("/types/report.build/ramp", url.Values{"steps": {"2,1"}}, http.StatusBadRequest)
		post("/types/report.build/ramp", url.Values{"steps": {"2,x"}}, http.StatusBadRequest)
		// The value as sent, not a stand-in.
		if r := post("/types/report.build/ramp", url.Values{"steps": {"2,4"}, "every": {"0"}}, http.StatusBadRequest); !strings.Contains(r.body, `got &#34;0&#34;`) || strings.Contains(r.body, "-1ns") {
			t.Errorf("every 0: %s", r.body)
		}
		if _, err := b.client.GetRamp(ctx, typeReport); !errors.Is(err, keel.ErrNotFound) {
			t.Fatalf("ramp after refused starts: %v, want none", err)
		}
		post("/types/report.build/ramp", url.Values{"steps": {"2, 4, 8"}, "every": {"5m"}}, http.StatusSeeOther)
		if r := b.do(t, "GET", "/queues", adminToken, nil); !strings.Contains(r.body, `id="ramp-report.build"`) ||
			!strings.Contains(r.body, `ramping</span> step 1 of 3 (2)`) || !strings.Contains(r.body, `30/s, burst default`) {
			t.Errorf("queues page shows no ramp or queue rate")
		}
		if ramp, err := b.client.GetRamp(ctx, typeReport); err != nil || ramp.Every != 5*time.Minute || len(ramp.Steps) != 3 {
			t.Errorf("ramp started from the page: %+v, %v", ramp, err)
		}
		post("/types/report.build/ramp", url.Values{"op": {"stop"}}, http.StatusSeeOther)
		if ramp, err := b.client.GetRamp(ctx, typeReport); err != nil || !ramp.Stopped {
			t.Errorf("ramp after stop from the page: %+v, %v", ramp, err)
		}
		ts, _ := b.client.Types(ctx)
		for _, ty := range ts {
			if ty.Name == typeReport && (!ty.Paused || ty.Timeout.String() != "45s" || ty.MaxAttempts != 7 || ty.BackoffMax.String() != "1m0s" ||
				ty.Concurrency != 2 || ty.Rate != 12.5 || ty.Burst != 4) {
				t.Errorf("type report.build after updates: %+v", ty)
			}
		}
		if r := b.do(t, "GET", "/queues", adminToken, nil); !strings.Contains(r.body, `id="queue-reports-pause"`) || !strings.Contains(r.body, `id="type-report.build-settings"`) {
			t.Errorf("queues page shows admin no forms")
		}

		// An open brake: a banner and a row with a close button; closing it
		// by hand says so and clears the banner.
		now := time.Now()
		if ok, err := b.drv.(driver.Braker).ChangeBrake(ctx, driver.BrakeChange{To: driver.BrakeRow{Type: typeReport, State: driver.BrakeOpen,
			OpenedAt: now, Until: now.Add(time.Minute), Ratio: 0.6, Attempts: 20, Reason: "12 of the last 20 attempts failed"},
			From: []driver.BrakeState{driver.BrakeClosed}, Now: now}); err != nil || !ok {
			t.Fatalf("open brake: %v %v", ok, err)
		}
		if r := b.do(t, "GET", "/queues", adminToken, nil); !strings.Contains(r.body, `id="brake-banner-report.build"`) ||
			!strings.Contains(r.body, `id="brake-report.build-close"`) || !strings.Contains(r.body, "12 of the last 20 attempts failed") {
			t.Errorf("queues page shows no open brake:\n%s", r.body)
		}
		// The type's status says braked, not active (it is paused too).
		if r := b.do(t, "GET", "/queues", readToken, nil); !strings.Contains(r.body, `<td id="t-report.build-status"><span class="badge state-scheduled">paused</span> <span class="badge state-dead">braked</span></td>`) {
			t.Errorf("queues page: the braked type's status is not braked")
		}
		if r := post("/types/report.build/brake/close", url.Values{}, http.StatusSeeOther); r.header.Get("Location") != "/queues?done=brake&n=report.build" {
			t.Errorf("after closing the brake: Location %q", r.header.Get("Location"))
		}
		if r := b.do(t, "GET", "/queues?done=brake&n=report.build", adminToken, nil); strings.Contains(r.body, `id="brake-banner-`) ||
			!strings.Contains(r.body, "The brake of type report.build is closed") {
			t.Errorf("queues page after closing the brake:\n%s", r.body)
		}
		if r := b.do(t, "GET", "/queues", readToken, nil); strings.Contains(r.body, `state-dead">braked`) {
			i := strings.Index(r.body, `state-dead">braked`)
			t.Errorf("queues page: a closed brake still shows braked: %s", r.body[max(0, i-300):i+30])
		}
		post("/types/report.build/brake/close", url.Values{}, http.StatusConflict)

		post(fmt.Sprintf("/tasks/%d/cancel", s.pending), url.Values{}, http.StatusSeeOther)
		if st := state(s.pending); st != keel.StateCancelled {
			t.Errorf("cancelled task is %s", st)
		}
		post(fmt.Sprintf("/tasks/%d/cancel", s.pending), url.Values{}, http.StatusConflict)
		post(fmt.Sprintf("/tasks/%d/retry", s.dead[0]), url.Values{}, http.StatusSeeOther)
		if st := state(s.dead[0]); st != keel.StatePending {
			t.Errorf("retried task is %s", st)
		}

		post("/dead/selected", url.Values{"action": {"requeue"}, "id": {fmt.Sprint(s.dead[1])}}, http.StatusSeeOther)
		if st := state(s.dead[1]); st != keel.StatePending {
			t.Errorf("requeued dead letter is %s", st)
		}
		post("/dead/selected", url.Values{"action": {"requeue"}, "id": {fmt.Sprint(s.dead[1])}}, http.StatusConflict) // no longer dead
		// Purge needs force for dead letters younger than 7 days.
		r = post("/dead/selected", url.Values{"action": {"purge"}, "id": {fmt.Sprint(s.dead[2])}}, http.StatusConflict)
		if !strings.Contains(r.body, "younger than 7 days") {
			t.Errorf("young purge refusal: %s", r.body)
		}
		post("/dead/selected", url.Values{"action": {"purge"}, "force": {"yes"}, "id": {fmt.Sprint(s.dead[2])}}, http.StatusSeeOther)
		if _, err := b.client.Get(ctx, s.dead[2]); err == nil {
			t.Errorf("purged dead letter %d still there", s.dead[2])
		}

		// By filter: confirm first, with the count; then do it.
		r = post("/dead/matching", url.Values{"action": {"purge"}, "type": {typeMail}}, http.StatusOK)
		if !strings.Contains(r.body, "Nothing to purge") {
			t.Errorf("purge without force of young dead letters: %s", r.body)
		}
		r = post("/dead/matching", url.Values{"action": {"requeue"}, "type": {typeMail}}, http.StatusOK)
		if !strings.Contains(r.body, `<strong>2</strong> dead letters of type <code>mail.send</code>`) || !strings.Contains(r.body, `id="confirm-yes"`) {
			t.Errorf("requeue confirmation: %s", r.body)
		}
		checkPage(t, "confirm", r)
		post("/dead/matching", url.Values{"action": {"requeue"}, "type": {typeMail}, "confirm": {"yes"}}, http.StatusSeeOther)
		for _, id := range s.dead[3:] {
			if st := state(id); st != keel.StatePending {
				t.Errorf("requeued-by-filter task %d is %s", id, st)
			}
		}
		post("/dead/selected", url.Values{"action": {"purge"}}, http.StatusBadRequest)
		post("/dead/matching", url.Values{"action": {"explode"}}, http.StatusBadRequest)

		// Schedules: the page shows the next run in the schedule's zone
		// (03:00 in Tokyo) and the admin's buttons; pause, trigger and
		// resume act.
		r = b.do(t, "GET", "/schedules", adminToken, nil)
		if !strings.Contains(r.body, `id="s-nightly"`) || !strings.Contains(r.body, "03:00:00 &#43;09:00") || !strings.Contains(r.body, `id="schedule-nightly-trigger"`) {
			t.Errorf("schedules page: %s", r.body)
		}
		r = post("/schedules/nightly", url.Values{"op": {"pause"}}, http.StatusSeeOther)
		if loc := r.header.Get("Location"); loc != "/schedules?done=schedule&n=nightly" {
			t.Errorf("after schedule pause: Location %q", loc)
		}
		if si, err := b.client.GetSchedule(ctx, "nightly"); err != nil || !si.Paused {
			t.Errorf("schedule after pause: %+v %v", si, err)
		}
		before, _ := b.client.Counts(ctx)
		post("/schedules/nightly", url.Values{"op": {"trigger"}}, http.StatusSeeOther)
		if after, _ := b.client.Counts(ctx); after["reports"][keel.StatePending] != before["reports"][keel.StatePending]+1 {
			t.Errorf("trigger: pending tasks of queue reports %d, want %d", after["reports"][keel.StatePending], before["reports"][keel.StatePending]+1)
		}
		post("/schedules/nightly", url.Values{"op": {"resume"}}, http.StatusSeeOther)
		if si, err := b.client.GetSchedule(ctx, "nightly"); err != nil || si.Paused {
			t.Errorf("schedule after resume: %+v %v", si, err)
		}
		post("/schedules/nightly", url.Values{"op": {"explode"}}, http.StatusBadRequest)
		post("/schedules/nope", url.Values{"op": {"pause"}}, http.StatusNotFound)
	})
}

// TestPurgeOld: dead letters older than 7 days purge without force, by id
// and by filter.
func TestPurgeOld(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{})
	s := seed(t, b, 3)
	h, err := New(b.client, Options{Now: func() time.Time { return time.Now().Add(8 * 24 * time.Hour) }, Logger: b.log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	old := &bundle{srv: srv, client: b.client, drv: b.drv, log: b.log}
	if r := old.do(t, "POST", "/dead/selected", "", url.Values{"action": {"purge"}, "id": {fmt.Sprint(s.dead[0]), fmt.Sprint(s.dead[1])}}); r.status != http.StatusSeeOther {
		t.Fatalf("purge old selected: %d %s", r.status, r.body)
	}
	r := old.do(t, "POST", "/dead/matching", "", url.Values{"action": {"purge"}})
	if !strings.Contains(r.body, "the 1 dead letter") && !strings.Contains(r.body, "<strong>1</strong> dead letter") {
		t.Errorf("purge old by filter confirmation: %s", r.body)
	}
	if r := old.do(t, "POST", "/dead/matching", "", url.Values{"action": {"purge"}, "confirm": {"yes"}}); r.status != http.StatusSeeOther {
		t.Fatalf("purge old by filter: %d %s", r.status, r.body)
	}
	for _, id := range s.dead {
		if _, err := b.client.Get(t.Context(), id); err == nil {
			t.Errorf("old dead letter %d not purged", id)
		}
	}
}

// TestTasksWindow: a list filtered by type or queue reads a bounded
// window of ids a page and offers to search the next one, so that a rare
// type costs a bounded read on a table of millions.
func TestTasksWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{window: 5})
	ctx := t.Context()
	// Ids 1 and 2 are reports, 3..12 mail.
	for i := range 12 {
		typ := typeMail
		if i < 2 {
			typ = typeReport
		}
		if _, err := b.client.Enqueue(ctx, typ, map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	res := b.do(t, "GET", "/tasks?type="+typeReport, "", nil)
	if res.status != http.StatusOK || !strings.Contains(res.body, `id="tasks-empty"`) || !strings.Contains(res.body, "among tasks 8 to 12") {
		t.Fatalf("first window: %d\n%s", res.status, res.body)
	}
	m := regexp.MustCompile(`id="search-older" href="([^"]+)"`).FindStringSubmatch(res.body)
	if m == nil {
		t.Fatalf("no link to search older tasks:\n%s", res.body)
	}
	// Tasks 3..7: none; then 1..2: both reports, and nothing below.
	res = b.do(t, "GET", html.UnescapeString(m[1]), "", nil)
	if !strings.Contains(res.body, "among tasks 3 to 7") {
		t.Fatalf("second window:\n%s", res.body)
	}
	m = regexp.MustCompile(`id="search-older" href="([^"]+)"`).FindStringSubmatch(res.body)
	if m == nil {
		t.Fatalf("no link to the third window:\n%s", res.body)
	}
	res = b.do(t, "GET", html.UnescapeString(m[1]), "", nil)
	if !strings.Contains(res.body, `id="task-1"`) || !strings.Contains(res.body, `id="task-2"`) || strings.Contains(res.body, `id="search-older"`) {
		t.Fatalf("last window:\n%s", res.body)
	}
	// Without a type or queue filter there is no window.
	if res := b.do(t, "GET", "/tasks", "", nil); strings.Contains(res.body, "window-note") || !strings.Contains(res.body, `id="task-12"`) {
		t.Fatalf("unfiltered list:\n%s", res.body)
	}
}

// TestTaskFilters: the task list takes lists and prefixes of types, leaves
// out the types it is told to, and hides keel's own tasks unless asked for
// or named.
func TestTaskFilters(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		ctx := t.Context()
		mail, err := b.client.Enqueue(ctx, typeMail, map[string]int{"i": 1})
		if err != nil {
			t.Fatal(err)
		}
		report, err := b.client.Enqueue(ctx, typeReport, map[string]int{"i": 2}, keel.Queue("reports"))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		own, err := b.drv.Insert(ctx, []driver.InsertParams{
			{Queue: keel.ReservedQueue, Type: "keel.notify.ops", Payload: []byte(`{"alert_id":1}`), PayloadDigest: "d1", MaxAttempts: 3, RunAt: now, Timeout: time.Minute, Now: now},
			{Queue: "reports", Type: "keel.on_dead", Payload: []byte(`{}`), PayloadDigest: "d2", MaxAttempts: 3, RunAt: now, Timeout: time.Minute, Now: now},
		})
		if err != nil {
			t.Fatal(err)
		}
		row := func(id int64) string { return fmt.Sprintf(`id="task-%d"`, id) }
		for _, tc := range []struct {
			path      string
			shown     []int64
			hidden    []int64
			ownHidden bool
		}{
			{"/tasks", []int64{mail.ID, report.ID}, []int64{own[0].Task.ID, own[1].Task.ID}, true},
			{"/tasks?own=1", []int64{mail.ID, report.ID, own[0].Task.ID, own[1].Task.ID}, nil, false},
			{"/tasks?type=keel.*", []int64{own[0].Task.ID, own[1].Task.ID}, []int64{mail.ID, report.ID}, false},
			{"/tasks?queue=keel", []int64{own[0].Task.ID}, []int64{mail.ID, report.ID, own[1].Task.ID}, false},
			{"/tasks?queue=reports", []int64{report.ID}, []int64{own[1].Task.ID}, true},
			{"/tasks?type=" + url.QueryEscape(typeMail+", "+typeReport), []int64{mail.ID, report.ID}, nil, true},
			{"/tasks?type=report.*", []int64{report.ID}, []int64{mail.ID}, true},
			{"/tasks?exclude_type=report.*", []int64{mail.ID}, []int64{report.ID, own[0].Task.ID}, true},
			{"/tasks?exclude_type=report.*&own=1", []int64{mail.ID, own[0].Task.ID, own[1].Task.ID}, []int64{report.ID}, false},
		} {
			res := b.do(t, "GET", tc.path, adminToken, nil)
			if res.status != http.StatusOK {
				t.Fatalf("%s: status %d\n%s", tc.path, res.status, res.body)
			}
			for _, id := range tc.shown {
				if !strings.Contains(res.body, row(id)) {
					t.Errorf("%s: task %d not shown", tc.path, id)
				}
			}
			for _, id := range tc.hidden {
				if strings.Contains(res.body, row(id)) {
					t.Errorf("%s: task %d shown", tc.path, id)
				}
			}
			if got := strings.Contains(res.body, `id="own-hidden"`); got != tc.ownHidden {
				t.Errorf("%s: says keel's own tasks are left out: %v, want %v", tc.path, got, tc.ownHidden)
			}
		}
		res := b.do(t, "GET", "/tasks?exclude_type=report.*&own=1", adminToken, nil)
		if !strings.Contains(res.body, `id="filter-exclude-type" value="report.*"`) || !regexp.MustCompile(`id="filter-own" value="1"\s+checked`).MatchString(res.body) {
			t.Errorf("the form does not keep the filter:\n%s", res.body)
		}
		res = b.do(t, "GET", "/tasks?exclude_type="+url.QueryEscape("report.*, bad name"), adminToken, nil)
		if res.status != http.StatusBadRequest || !strings.Contains(res.body, "invalid excluded type &#34;bad name&#34;") {
			t.Errorf("a bad name to leave out: %d\n%s", res.status, res.body)
		}
	})
}
