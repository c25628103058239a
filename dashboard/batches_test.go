package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	ibatch "github.com/keelq/keel/internal/batch"
)

// finishedBatch enqueues a batch of four mail.send members, has a worker
// succeed two, dead-letter one (evilError) and cancels the fourth, then
// finishes the batch as the leader does: its on_finish callback (a
// report.build task of queue "reports", payload evilPayload) is enqueued,
// its on_success is not.
func finishedBatch(t *testing.T, b *bundle) *batch.Info {
	t.Helper()
	ctx := t.Context()
	var tasks []keel.TaskSpec
	for _, ok := range []bool{true, true, false, true} {
		tasks = append(tasks, keel.TaskSpec{Type: typeMail, Payload: map[string]bool{"ok": ok}})
	}
	info, members, err := batch.Enqueue(ctx, b.client, batch.Spec{Tasks: tasks,
		OnSuccess: &keel.TaskSpec{Type: typeReport, Payload: json.RawMessage(evilPayload), Options: []keel.Option{keel.Queue("reports")}},
		OnFinish:  &keel.TaskSpec{Type: typeReport, Payload: json.RawMessage(evilPayload), Options: []keel.Option{keel.Queue("reports")}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Cancel(ctx, members[3].ID); err != nil {
		t.Fatal(err)
	}
	h := keel.NewHandlers()
	keel.Handle(h, typeMail, func(ctx context.Context, task *keel.Task[map[string]bool]) error {
		if task.Args["ok"] {
			return nil
		}
		return keel.Permanent(errors.New(evilError))
	})
	w, err := keel.NewClient(keel.Config{Driver: b.drv, Handlers: h, Logger: b.log, PollInterval: 20 * time.Millisecond,
		Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {}}, Alerts: keel.AlertConfig{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Stop(sctx) //nolint:errcheck // always nil
	}()
	deadline := time.Now().Add(20 * time.Second)
	for _, m := range members[:3] {
		for {
			ti, err := b.client.Get(ctx, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ti.State == keel.StateSucceeded || ti.State == keel.StateDead {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("member %d still %s after 20s", m.ID, ti.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The leader's pass (the worker's own leader may have run it first).
	store, ok := b.drv.(ibatch.Store)
	if !ok {
		t.Fatalf("driver %T keeps no batches", b.drv)
	}
	if err := ibatch.New(ibatch.Config{Store: store}).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := batch.Get(ctx, b.client, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != batch.Finished || got.OnFinishID == 0 || got.OnSuccessID != 0 {
		t.Fatalf("batch %d after the pass: %+v", info.ID, got)
	}
	return got
}

// TestBatchPages: the batch list and a batch's page show a finished batch
// with its final counts and callback, an open one with its live counts,
// a sealed one of 51 members a page of members at a time; the list pages
// and filters the unfinished; a member's task page links to its batch;
// bad and missing ids are errors in words with the value escaped.
func TestBatchPages(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		ctx := t.Context()
		fin := finishedBatch(t, b)
		open, openMembers, err := batch.Enqueue(ctx, b.client, batch.Spec{Open: true, Tasks: []keel.TaskSpec{
			{Type: typeReport, Payload: json.RawMessage(evilPayload), Options: []keel.Option{keel.Queue("reports")}},
			{Type: typeReport, Payload: json.RawMessage(evilPayload), Options: []keel.Option{keel.Queue("reports")}}}})
		if err != nil {
			t.Fatal(err)
		}
		var many []keel.TaskSpec
		for i := range pageSize + 1 {
			many = append(many, keel.TaskSpec{Type: typeReport, Payload: map[string]int{"i": i}, Options: []keel.Option{keel.Queue("reports")}})
		}
		big, bigMembers, err := batch.Enqueue(ctx, b.client, batch.Spec{Tasks: many})
		if err != nil {
			t.Fatal(err)
		}
		// Enough empty open batches that the first three fall on the
		// second page of the list.
		var newest int64
		for range pageSize {
			e, _, err := batch.Enqueue(ctx, b.client, batch.Spec{Open: true})
			if err != nil {
				t.Fatal(err)
			}
			newest = e.ID
		}
		plain, err := b.client.Enqueue(ctx, typeMail, map[string]int{"plain": 1})
		if err != nil {
			t.Fatal(err)
		}
		get := func(path string, want int) response {
			t.Helper()
			r := b.do(t, "GET", path, readToken, nil)
			if r.status != want {
				t.Fatalf("%s: status %d, want %d:\n%s", path, r.status, want, r.body)
			}
			checkPage(t, path, r)
			return r
		}
		has := func(path string, r response, want ...string) {
			t.Helper()
			for _, w := range want {
				if !strings.Contains(r.body, w) {
					t.Errorf("%s: no %q in the page", path, w)
				}
			}
		}
		hasNot := func(path string, r response, bad ...string) {
			t.Helper()
			for _, w := range bad {
				if strings.Contains(r.body, w) {
					t.Errorf("%s: %q in the page", path, w)
				}
			}
		}
		row := func(id int64) string { return fmt.Sprintf(`id="batch-%d"`, id) }

		// The list: newest first, 50 a page, the menu entry lit.
		r := get("/batches", http.StatusOK)
		has("/batches", r, row(newest), `id="nav-batches" href="/batches" class="active"`, `id="next-page"`)
		hasNot("/batches", r, row(fin.ID), row(open.ID), row(big.ID), `id="first-page"`)
		m := regexp.MustCompile(`id="next-page" href="([^"]+)"`).FindStringSubmatch(r.body)
		if m == nil {
			t.Fatalf("/batches: no next page link")
		}
		next := html.UnescapeString(m[1])
		if want := fmt.Sprintf("/batches?before_id=%d", newest-pageSize+1); next != want {
			t.Errorf("/batches: next page %q, want %q", next, want)
		}
		r = get(next, http.StatusOK)
		has(next, r, row(fin.ID), row(open.ID), row(big.ID), `id="first-page"`,
			fmt.Sprintf(`<td id="batch-%d-counts"><span class="text-succeeded">2</span> succeeded · <span class="text-dead">1</span> dead · <span class="text-cancelled">1</span> cancelled of 4</td>`, fin.ID),
			fmt.Sprintf(`<td id="batch-%d-counts">2 members, more may join</td>`, open.ID),
			fmt.Sprintf(`<td id="batch-%d-counts">51 members</td>`, big.ID),
			`<progress value="1" max="1"`, "100.0%", `<span class="badge state-dead">finished</span>`,
			`<span class="badge state-scheduled">open</span>`, `<span class="badge state-running">running</span>`)
		hasNot(next, r, `id="next-page"`, row(newest))
		// Unfinished only: the finished batch is left out, the filter kept.
		p := fmt.Sprintf("/batches?unfinished=1&before_id=%d", big.ID+1)
		r = get(p, http.StatusOK)
		has(p, r, row(open.ID), row(big.ID), `id="filter-unfinished" value="1" checked`)
		hasNot(p, r, row(fin.ID))
		if r := get("/batches?unfinished=1", http.StatusOK); !strings.Contains(r.body, `href="/batches?before_id=`) ||
			!strings.Contains(r.body, `unfinished=1`) {
			t.Errorf("/batches?unfinished=1: the next page does not keep the filter")
		}
		r = get(fmt.Sprintf("/batches?before_id=%d", fin.ID), http.StatusOK)
		has("/batches before the first", r, `id="batches-empty"`)

		// The finished batch's page: final counts, times, its on_finish.
		p = fmt.Sprintf("/batches/%d", fin.ID)
		r = get(p, http.StatusOK)
		has(p, r, fmt.Sprintf("<title>Batch %d · keel</title>", fin.ID), `id="batch-state" class="badge big-badge state-dead">finished<`,
			`id="batch-total">4<`, `id="batch-pending">0<`, `id="batch-running">0<`, `id="batch-succeeded">2<`,
			`id="batch-dead">1<`, `id="batch-cancelled">1<`, `id="batch-progress" value="1" max="1"`, "100.0%: 4 of 4 members finished",
			fmt.Sprintf(`<dd id="batch-on-finish"><a href="/tasks/%d">task %d</a></dd>`, fin.OnFinishID, fin.OnFinishID),
			`<dd id="batch-on-success"><span class="muted">not enqueued</span></dd>`, `id="nav-batches" href="/batches" class="active"`)
		hasNot(p, r, `<dd id="batch-finished">not yet`, `<dd id="batch-sealed">not yet`, `id="next-page"`, `id="batch-eta"`)
		if n := strings.Count(r.body, `<tr id="member-`); n != 4 {
			t.Errorf("%s: %d members listed, want 4", p, n)
		}
		has(p, r, `<span class="badge state-dead">dead</span>`, `<span class="badge state-cancelled">cancelled</span>`)
		// The callback's page escapes its payload (the batch's event, with
		// the hostile data).
		r = get(fmt.Sprintf("/tasks/%d", fin.OnFinishID), http.StatusOK)
		has("on_finish task", r, "&lt;script&gt;alert(1)&lt;/script&gt;")

		// The open batch: live counts, not sealed, not finished.
		p = fmt.Sprintf("/batches/%d", open.ID)
		r = get(p, http.StatusOK)
		has(p, r, `id="batch-state" class="badge big-badge state-scheduled">open<`, `id="batch-total">2<`, `id="batch-pending">2<`,
			`id="batch-succeeded">0<`, `id="batch-progress" value="0" max="1"`, "0.0%: 0 of 2 members finished",
			`<dd id="batch-sealed">not yet`, `<dd id="batch-finished">not yet`, `<dd id="batch-on-finish"><span class="muted">not enqueued</span>`,
			fmt.Sprintf(`<tr id="member-%d">`, openMembers[0].ID), fmt.Sprintf(`<tr id="member-%d">`, openMembers[1].ID))

		// The sealed batch of 51: 50 members, then the 51st.
		p = fmt.Sprintf("/batches/%d", big.ID)
		r = get(p, http.StatusOK)
		has(p, r, `id="batch-state" class="badge big-badge state-running">running<`, `id="batch-pending">51<`,
			fmt.Sprintf(`href="/batches/%d?after_id=%d"`, big.ID, bigMembers[pageSize-1].ID))
		hasNot(p, r, `id="first-page"`, fmt.Sprintf(`<tr id="member-%d">`, bigMembers[pageSize].ID))
		if n := strings.Count(r.body, `<tr id="member-`); n != pageSize {
			t.Errorf("%s: %d members listed, want %d", p, n, pageSize)
		}
		p = fmt.Sprintf("/batches/%d?after_id=%d", big.ID, bigMembers[pageSize-1].ID)
		r = get(p, http.StatusOK)
		has(p, r, fmt.Sprintf(`<tr id="member-%d">`, bigMembers[pageSize].ID), `id="first-page"`)
		hasNot(p, r, `id="next-page"`)
		if n := strings.Count(r.body, `<tr id="member-`); n != 1 {
			t.Errorf("%s: %d members listed, want 1", p, n)
		}

		// A member's task page links to its batch; a task of no batch has
		// no such line.
		p = fmt.Sprintf("/tasks/%d", openMembers[0].ID)
		r = get(p, http.StatusOK)
		has(p, r, fmt.Sprintf(`<dd id="task-batch"><a href="/batches/%d">Batch #%d</a></dd>`, open.ID, open.ID))
		r = get(fmt.Sprintf("/tasks/%d", plain.ID), http.StatusOK)
		hasNot("plain task", r, `id="task-batch"`)

		// Errors in words, the bad value escaped.
		for p, want := range map[string]int{
			"/batches/999999": 404, "/batches/abc": 400, "/batches/0": 400, "/batches/-3": 400,
			"/batches?before_id=x": 400, "/batches?unfinished=yes": 400,
			fmt.Sprintf("/batches/%d?after_id=-1", fin.ID): 400,
		} {
			r := get(p, want)
			has(p, r, `id="error-message"`)
		}
		for _, p := range []string{"/batches?before_id=%3Cscript%3Ealert(1)%3C/script%3E",
			fmt.Sprintf("/batches/%d?after_id=%%3Cscript%%3Ealert(1)%%3C/script%%3E", fin.ID), "/batches/%3Cscript%3Ealert(1)%3C%2Fscript%3E"} {
			r := get(p, http.StatusBadRequest)
			has(p, r, "&lt;script&gt;alert(1)&lt;/script&gt;")
		}

		// Every role may look; no session is sent to the login form.
		for _, tok := range []string{adminToken, enqueueToken} {
			for _, p := range []string{"/batches", fmt.Sprintf("/batches/%d", fin.ID)} {
				if r := b.do(t, "GET", p, tok, nil); r.status != http.StatusOK {
					t.Errorf("%s as %s: status %d", p, tok, r.status)
				}
			}
		}
		if r := b.do(t, "GET", "/batches", "", nil); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login?next=") {
			t.Errorf("/batches without a session: %d %q", r.status, r.header.Get("Location"))
		}
	})
}
