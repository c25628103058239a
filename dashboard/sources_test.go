package dashboard

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// TestSourcesPage: the sources page shows each report and the rejected
// messages, newest first with the open ones marked and a body preview;
// a message's page shows its headers and body; admin resubmits (as
// stored or corrected) and deletes after a confirmation; what cannot
// become a task is refused with the reason and changes nothing.
func TestSourcesPage(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		ctx := t.Context()
		first := seedSources(t, b)
		ss := b.drv.(driver.SourceStore)
		add := func(source, typ string, body []byte, reason string) int64 {
			t.Helper()
			d := sha256.Sum256(body)
			res, err := ss.InsertRejected(ctx, []driver.RejectedParams{{Source: source, Type: typ, Key: "/order_id", Reason: reason,
				Body: body, Size: int64(len(body)), Digest: d[:], ReceivedAt: time.Now()}})
			if err != nil {
				t.Fatal(err)
			}
			return res[0].ID
		}
		ready := add("orders", typeMail, []byte(`{"order_id":"A7","to":"a@example.com"}`), "body of 38 bytes is over the limit of 10")
		binary := add("events", typeReport, []byte{0xff, 0xfe, 0x00}, "body is not JSON")

		r := b.do(t, "GET", "/sources", readToken, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET /sources: %d %s", r.status, r.body)
		}
		checkPage(t, "/sources", r)
		if !regexp.MustCompile(`(?s)id="src-orders-node-1".*rabbitmq.*state-succeeded">running<.*>42<.*>2ms<.*>80ms<`).MatchString(r.body) {
			t.Errorf("sources table:\n%s", r.body)
		}
		rows := regexp.MustCompile(`id="rejected-(\d+)"`).FindAllStringSubmatch(r.body, -1)
		if len(rows) != 3 || rows[0][1] != fmt.Sprint(binary) || rows[2][1] != fmt.Sprint(first) {
			t.Fatalf("rejected rows %v, want %d, %d, %d", rows, binary, ready, first)
		}
		if !strings.Contains(r.body, "(binary, 3 bytes)") || !strings.Contains(r.body, `{&#34;order_id&#34;:&#34;A7&#34;,&#34;to&#34;:&#34;a@example.com&#34;}`) ||
			strings.Count(r.body, `state-dead">open<`) != 3 || strings.Contains(r.body, `action="/rejected/`) {
			t.Errorf("rejected rows as read (previews, open marks, no forms):\n%s", r.body)
		}
		if r := b.do(t, "GET", "/sources?source=events", readToken, nil); strings.Contains(r.body, fmt.Sprintf(`id="rejected-%d"`, ready)) ||
			!strings.Contains(r.body, fmt.Sprintf(`id="rejected-%d"`, binary)) {
			t.Errorf("?source=events:\n%s", r.body)
		}
		r = b.do(t, "GET", fmt.Sprintf("/rejected/%d", first), readToken, nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, "message-id") || !strings.Contains(r.body, "m-1") ||
			!strings.Contains(r.body, `<pre id="rejected-body">{&#34;x&#34;:&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;}</pre>`) ||
			strings.Contains(r.body, `id="rejected-actions"`) {
			t.Errorf("message page as read:\n%s", r.body)
		}
		if r := b.do(t, "GET", fmt.Sprintf("/rejected/%d", binary), adminToken, nil); !strings.Contains(r.body, "not UTF-8 text: base64") ||
			!strings.Contains(r.body, `<pre id="rejected-body">//4A</pre>`) || !strings.Contains(r.body, `id="rejected-resubmit"`) {
			t.Errorf("binary message page as admin:\n%s", r.body)
		}
		for p, want := range map[string]int{"/rejected/abc": 400, "/rejected/999999": 404, "/sources?before=x": 400} {
			if r := b.do(t, "GET", p, readToken, nil); r.status != want || !strings.Contains(r.body, `id="error-message"`) {
				t.Errorf("%s: status %d, want %d: %s", p, r.status, want, r.body)
			}
		}

		post := func(path string, form url.Values, want int) response {
			t.Helper()
			r := b.do(t, "POST", path, adminToken, form)
			if r.status != want {
				t.Fatalf("POST %s %v: status %d, want %d: %s", path, form, r.status, want, r.body)
			}
			checkPage(t, path, r)
			return r
		}
		open := func(id int64) bool {
			t.Helper()
			m, err := b.client.GetRejected(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return m.TaskID == 0
		}
		if r := b.do(t, "GET", "/sources", adminToken, nil); !strings.Contains(r.body, fmt.Sprintf(`id="rejected-%d-resubmit"`, ready)) ||
			!strings.Contains(r.body, fmt.Sprintf(`id="rejected-%d-delete"`, first)) {
			t.Errorf("admin sees no actions:\n%s", r.body)
		}

		// Refused: not JSON, no key; a form payload that is not JSON.
		before, _ := b.client.Counts(ctx)
		r = post(fmt.Sprintf("/rejected/%d/resubmit", binary), url.Values{}, http.StatusUnprocessableEntity)
		if !strings.Contains(r.body, "Cannot become a task") || !strings.Contains(r.body, "body is not JSON") {
			t.Errorf("resubmit of a binary body: %s", r.body)
		}
		post(fmt.Sprintf("/rejected/%d/resubmit", first), url.Values{}, http.StatusUnprocessableEntity) // no /order_id in it
		post(fmt.Sprintf("/rejected/%d/resubmit", first), url.Values{"payload": {`{"order_id":`}}, http.StatusBadRequest)
		post("/rejected/x/resubmit", url.Values{}, http.StatusBadRequest)
		post("/rejected/999999/resubmit", url.Values{}, http.StatusNotFound)
		if after, _ := b.client.Counts(ctx); fmt.Sprint(before) != fmt.Sprint(after) || !open(binary) || !open(first) {
			t.Fatalf("refused resubmits changed something: %v, then %v", before, after)
		}

		// As stored, from the list; then again: the same task.
		r = post(fmt.Sprintf("/rejected/%d/resubmit", ready), url.Values{}, http.StatusSeeOther)
		m, err := b.client.GetRejected(ctx, ready)
		if err != nil || m.TaskID == 0 {
			t.Fatalf("resubmitted message: %+v %v", m, err)
		}
		if loc := r.header.Get("Location"); loc != fmt.Sprintf("/sources?done=resubmitted&n=%d", m.TaskID) {
			t.Errorf("after resubmit: Location %q", loc)
		}
		if r := b.do(t, "GET", fmt.Sprintf("/sources?done=resubmitted&n=%d", m.TaskID), adminToken, nil); !strings.Contains(r.body, fmt.Sprintf("The message is task %d now.", m.TaskID)) ||
			!strings.Contains(r.body, fmt.Sprintf(`<a href="/tasks/%d">task %d</a>`, m.TaskID, m.TaskID)) {
			t.Errorf("list after resubmit:\n%s", r.body)
		}
		task, err := b.client.Get(ctx, m.TaskID)
		if err != nil || task.Type != typeMail || task.State != keel.StatePending {
			t.Fatalf("the task: %+v %v", task, err)
		}
		r = post(fmt.Sprintf("/rejected/%d/resubmit", ready), url.Values{"back": {"message"}}, http.StatusSeeOther)
		if loc := r.header.Get("Location"); loc != fmt.Sprintf("/rejected/%d?done=resubmitted-before&n=%d", ready, m.TaskID) {
			t.Errorf("second resubmit: Location %q", loc)
		}
		if r := b.do(t, "GET", "/sources?open=true", adminToken, nil); strings.Contains(r.body, fmt.Sprintf(`id="rejected-%d"`, ready)) {
			t.Errorf("?open=true lists the resubmitted message")
		}

		// Corrected on the message's page: a payload and a key.
		post(fmt.Sprintf("/rejected/%d/resubmit", first), url.Values{"payload": {`{"order_id":"B1"}`}, "key": {"b-1"}, "back": {"message"}}, http.StatusSeeOther)
		if open(first) {
			t.Fatalf("message %d still open after a corrected resubmit", first)
		}

		// Delete asks first, naming the message; then deletes it.
		r = post(fmt.Sprintf("/rejected/%d/delete", binary), url.Values{}, http.StatusOK)
		if !strings.Contains(r.body, fmt.Sprintf("Delete rejected message <strong>%d</strong> from source <code>events</code>", binary)) ||
			!strings.Contains(r.body, `id="confirm-yes"`) || !open(binary) {
			t.Fatalf("delete confirmation:\n%s", r.body)
		}
		r = post(fmt.Sprintf("/rejected/%d/delete", binary), url.Values{"confirm": {"yes"}}, http.StatusSeeOther)
		if loc := r.header.Get("Location"); loc != fmt.Sprintf("/sources?done=rejected-deleted&n=%d", binary) {
			t.Errorf("after delete: Location %q", loc)
		}
		if _, err := b.client.GetRejected(ctx, binary); !errors.Is(err, keel.ErrNotFound) {
			t.Fatalf("deleted message: %v", err)
		}
		post(fmt.Sprintf("/rejected/%d/delete", binary), url.Values{"confirm": {"yes"}}, http.StatusNotFound)
	})
}

// TestSourcesPageRefused: read and enqueue sessions cannot resubmit or
// delete, and the message stays open.
func TestSourcesPageRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{Tokens: testTokens})
	id := seedSources(t, b)
	for _, tok := range []string{readToken, enqueueToken} {
		for _, a := range []string{"resubmit", "delete"} {
			r := b.do(t, "POST", fmt.Sprintf("/rejected/%d/%s", id, a), tok, url.Values{"confirm": {"yes"}, "payload": {`{"order_id":1}`}})
			if r.status != http.StatusForbidden || !strings.Contains(r.body, "needs an admin token") {
				t.Errorf("%s as %s: %d %s", a, tok, r.status, r.body)
			}
		}
	}
	if m, err := b.client.GetRejected(t.Context(), id); err != nil || m.TaskID != 0 {
		t.Fatalf("message after refused actions: %+v %v", m, err)
	}
}
