package server

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// sourceStore is the bundle's driver as a SourceStore.
func (b *bundle) sourceStore(t *testing.T) driver.SourceStore {
	t.Helper()
	s, ok := b.drv.(driver.SourceStore)
	if !ok {
		t.Fatalf("the %s driver is no driver.SourceStore", b.db)
	}
	return s
}

// reject stores a rejected message of source with body and reason, as a
// source would, and returns its id.
func (b *bundle) reject(t *testing.T, source, typ, key string, body []byte, reason string, headers string) int64 {
	t.Helper()
	digest := sha256.Sum256(body)
	res, err := b.sourceStore(t).InsertRejected(t.Context(), []driver.RejectedParams{{Source: source, Type: typ, Key: key,
		Reason: reason, Body: body, Size: int64(len(body)), Headers: []byte(headers), Digest: digest[:], ReceivedAt: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].ID
}

// rejectedIDs is the ids of a page, in order.
func rejectedIDs(l RejectedList) []int64 {
	var ids []int64
	for _, m := range l.Rejected {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestSourcesAPI: GET /v1/sources and GET /v1/stats show every source's
// report per node, durations as strings.
func TestSourcesAPI(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		var l SourceList
		b.call(t, "GET", "/v1/sources", "").ok(t, http.StatusOK, &l)
		if l.Sources == nil || len(l.Sources) != 0 {
			t.Fatalf("no reports: %+v (want an empty list, not null)", l)
		}
		var st Stats
		b.call(t, "GET", "/v1/stats", "").ok(t, http.StatusOK, &st)
		if st.Sources == nil || len(st.Sources) != 0 {
			t.Fatalf("stats without reports: sources %+v", st.Sources)
		}
		started := time.Now().Add(-time.Hour).Truncate(time.Second)
		for _, r := range []driver.SourceReport{
			{Source: "orders", Node: "node-b", Kind: "rabbitmq", Type: typeEmail, State: "running", Accepted: 10, Duplicate: 2, Rejected: 1,
				Nacked: 3, AckP50: 4 * time.Millisecond, AckP99: 250 * time.Millisecond, StartedAt: started, Now: time.Now()},
			{Source: "orders", Node: "node-a", Kind: "rabbitmq", Type: typeEmail, State: "connecting", LastError: "dial tcp: connection refused",
				StartedAt: started, Now: time.Now()},
			{Source: "events", Node: "node-a", Kind: "nats", Type: typeReport, State: "paused", Accepted: 7, StartedAt: started, Now: time.Now()},
		} {
			if err := b.sourceStore(t).ReportSource(t.Context(), r); err != nil {
				t.Fatal(err)
			}
		}
		res := b.call(t, "GET", "/v1/sources", "")
		res.ok(t, http.StatusOK, &l)
		if len(l.Sources) != 3 || l.Sources[0].Name != "events" || l.Sources[1].Node != "node-a" || l.Sources[2].Node != "node-b" {
			t.Fatalf("sources by name then node: %+v", l.Sources)
		}
		o := l.Sources[2]
		if o.Kind != "rabbitmq" || o.Type != typeEmail || o.State != "running" || o.Accepted != 10 || o.Duplicate != 2 || o.Rejected != 1 ||
			o.Nacked != 3 || time.Duration(o.AckP50) != 4*time.Millisecond || time.Duration(o.AckP99) != 250*time.Millisecond ||
			!o.StartedAt.Equal(started) || o.UpdatedAt.IsZero() || o.LastError != "" {
			t.Fatalf("orders on node-b: %+v", o)
		}
		if !strings.Contains(string(res.body), `"ack_p99":"250ms"`) {
			t.Errorf("ack_p99 is not a duration string: %s", res.body)
		}
		if a := l.Sources[1]; a.State != "connecting" || a.LastError != "dial tcp: connection refused" {
			t.Fatalf("orders on node-a: %+v", a)
		}
		b.call(t, "GET", "/v1/stats", "").ok(t, http.StatusOK, &st)
		if len(st.Sources) != 3 || st.Sources[2].Accepted != 10 || st.Sources[0].State != "paused" {
			t.Fatalf("stats sources: %+v", st.Sources)
		}
		b.call(t, "GET", "/v1/sources?node=a", "").problem(t, http.StatusBadRequest, `unknown query parameter "node"`)
	})
}

// TestRejectedAPI: list (newest first, text or base64 bodies, filters,
// pages), get, resubmit (as stored, with a payload or key, again) and
// delete; what still cannot become a task is refused with the reason and
// writes nothing.
func TestRejectedAPI(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		notJSON := b.reject(t, "orders", typeEmail, "/order_id", []byte("order A1, not JSON"), "body is not JSON",
			`{"content-type":["text/plain"],"message-id":["m-1"]}`)
		binary := b.reject(t, "orders", typeEmail, "/order_id", []byte{0xff, 0x00, 0x01}, "body is not JSON", `{}`)
		tooBig := b.reject(t, "orders", typeEmail, "/order_id", []byte(`{"order_id":"A2","to":"a@example.com"}`), "body of 39 bytes is over the limit of 10", `{}`)
		noKey := b.reject(t, "events", typeReport, "/id", []byte(`{"x":1}`), "no key: nothing at /id in the body", `{}`)
		unknownType := b.reject(t, "events", "order.created", "/id", []byte(`{"id":5}`), "body of 8 bytes is over the limit of 4", `{}`)

		var l RejectedList
		b.call(t, "GET", "/v1/rejected", "").ok(t, http.StatusOK, &l)
		if got := fmt.Sprint(rejectedIDs(l)); got != fmt.Sprint([]int64{unknownType, noKey, tooBig, binary, notJSON}) || l.NextCursor != "" {
			t.Fatalf("newest first: %s, cursor %q", got, l.NextCursor)
		}
		m := l.Rejected[4]
		if m.Source != "orders" || m.Type != typeEmail || m.Key != "/order_id" || m.Reason != "body is not JSON" || m.Body != "order A1, not JSON" ||
			m.BodyEncoding != "text" || m.Size != 18 || m.Truncated || m.Headers["message-id"][0] != "m-1" || m.ReceivedAt.IsZero() ||
			m.TaskID != 0 || m.ResubmittedAt != nil {
			t.Fatalf("the text message: %+v", m)
		}
		if m := l.Rejected[3]; m.BodyEncoding != "base64" || m.Body != base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0x01}) || m.Size != 3 || m.Headers == nil {
			t.Fatalf("the binary message: %+v", m)
		}
		b.call(t, "GET", "/v1/rejected?source=events", "").ok(t, http.StatusOK, &l)
		if got := fmt.Sprint(rejectedIDs(l)); got != fmt.Sprint([]int64{unknownType, noKey}) {
			t.Fatalf("source=events: %s", got)
		}
		// Pages of two, by cursor; and by before.
		b.call(t, "GET", "/v1/rejected?limit=2", "").ok(t, http.StatusOK, &l)
		if got := fmt.Sprint(rejectedIDs(l)); got != fmt.Sprint([]int64{unknownType, noKey}) || l.NextCursor == "" {
			t.Fatalf("first page: %s, cursor %q", got, l.NextCursor)
		}
		b.call(t, "GET", "/v1/rejected?limit=2&cursor="+l.NextCursor, "").ok(t, http.StatusOK, &l)
		b.call(t, "GET", "/v1/rejected?limit=2&cursor="+l.NextCursor, "").ok(t, http.StatusOK, &l)
		if got := fmt.Sprint(rejectedIDs(l)); got != fmt.Sprint([]int64{notJSON}) || l.NextCursor != "" {
			t.Fatalf("last page: %s, cursor %q", got, l.NextCursor)
		}
		b.call(t, "GET", fmt.Sprintf("/v1/rejected?before=%d", tooBig), "").ok(t, http.StatusOK, &l)
		if got := fmt.Sprint(rejectedIDs(l)); got != fmt.Sprint([]int64{binary, notJSON}) {
			t.Fatalf("before=%d: %s", tooBig, got)
		}

		// Resubmit as stored: the message becomes a task of its type with
		// the key read from the body; again answers the same task.
		var task Task
		res := b.call(t, "POST", fmt.Sprintf("/v1/rejected/%d/resubmit", tooBig), "")
		res.ok(t, http.StatusCreated, &task)
		if task.Type != typeEmail || task.Queue != "default" || task.State != "pending" || task.Duplicate ||
			!strings.Contains(string(task.Payload), `"order_id"`) || res.header.Get("Location") != fmt.Sprintf("/v1/tasks/%d", task.ID) {
			t.Fatalf("resubmitted task: %+v (Location %q)", task, res.header.Get("Location"))
		}
		var again Task
		b.call(t, "POST", fmt.Sprintf("/v1/rejected/%d/resubmit", tooBig), "").ok(t, http.StatusOK, &again)
		if again.ID != task.ID || !again.Duplicate {
			t.Fatalf("second resubmit: %+v, want task %d with duplicate", again, task.ID)
		}
		var got RejectedRecord
		b.call(t, "GET", fmt.Sprintf("/v1/rejected/%d", tooBig), "").ok(t, http.StatusOK, &got)
		if got.TaskID != task.ID || got.ResubmittedAt == nil {
			t.Fatalf("resubmitted message: %+v", got)
		}
		b.call(t, "GET", "/v1/rejected?open=true&source=orders", "").ok(t, http.StatusOK, &l)
		if got := fmt.Sprint(rejectedIDs(l)); got != fmt.Sprint([]int64{binary, notJSON}) {
			t.Fatalf("open=true: %s", got)
		}
		b.call(t, "GET", "/v1/rejected?open=false&source=orders", "").ok(t, http.StatusOK, &l)
		if len(l.Rejected) != 3 {
			t.Fatalf("open=false: %v", rejectedIDs(l))
		}

		// What still cannot become a task: 422 with the reason, nothing
		// written.
		before := b.state(t)
		for id, want := range map[int64]string{
			notJSON:     "cannot become a task: rejected message " + fmt.Sprint(notJSON) + ": body is not JSON",
			binary:      "body is not JSON",
			noKey:       "no key: nothing at /id in the body",
			unknownType: "order.created",
		} {
			b.call(t, "POST", fmt.Sprintf("/v1/rejected/%d/resubmit", id), "").problem(t, http.StatusUnprocessableEntity, want)
		}
		b.call(t, "POST", fmt.Sprintf("/v1/rejected/%d/resubmit", noKey), `{"payload":{"y":2}}`).problem(t, http.StatusUnprocessableEntity, "no key")
		b.unchanged(t, before)
		b.call(t, "GET", "/v1/rejected?open=true", "").ok(t, http.StatusOK, &l)
		if len(l.Rejected) != 4 {
			t.Fatalf("refused resubmits resolved messages: open %v", rejectedIDs(l))
		}

		// With a payload (its key read from it), and with a key.
		b.call(t, "POST", fmt.Sprintf("/v1/rejected/%d/resubmit", notJSON), `{"payload":{"order_id":"A1"}}`).ok(t, http.StatusCreated, &task)
		if task.Type != typeEmail || string(task.Payload) != `{"order_id": "A1"}` && string(task.Payload) != `{"order_id":"A1"}` {
			t.Fatalf("resubmitted with a payload: %+v", task)
		}
		b.call(t, "POST", fmt.Sprintf("/v1/rejected/%d/resubmit", noKey), `{"key":"report-1"}`).ok(t, http.StatusCreated, &task)
		if task.Type != typeReport {
			t.Fatalf("resubmitted with a key: %+v", task)
		}

		// A body cut at storing, or longer than a list shows.
		long := []byte(strings.Repeat("é", 40<<10)) // 80 KiB of text
		cut := []byte(`{"order_id":`)
		dl, dc := sha256.Sum256(long), sha256.Sum256(cut)
		ids, err := b.sourceStore(t).InsertRejected(t.Context(), []driver.RejectedParams{
			{Source: "big", Type: typeEmail, Key: "/order_id", Reason: "body is not JSON", Body: long, Size: int64(len(long)), Digest: dl[:], ReceivedAt: time.Now()},
			{Source: "big", Type: typeEmail, Key: "/order_id", Reason: "body of 9000000 bytes is over the limit of 1048576", Body: cut, Size: 9000000, Digest: dc[:], ReceivedAt: time.Now()},
		})
		if err != nil {
			t.Fatal(err)
		}
		b.call(t, "GET", "/v1/rejected?source=big", "").ok(t, http.StatusOK, &l)
		if len(l.Rejected) != 2 || !l.Rejected[1].Truncated || len(l.Rejected[1].Body) > listBodyLimit || len(l.Rejected[1].Body) < listBodyLimit-1 ||
			!strings.HasPrefix(string(long), l.Rejected[1].Body) || l.Rejected[1].Size != int64(len(long)) || !l.Rejected[0].Truncated {
			t.Fatalf("list of long bodies: %d messages, first truncated %v", len(l.Rejected), len(l.Rejected) > 1 && l.Rejected[1].Truncated)
		}
		b.call(t, "GET", fmt.Sprintf("/v1/rejected/%d", ids[0].ID), "").ok(t, http.StatusOK, &got)
		if got.Body != string(long) || got.Truncated || got.BodyEncoding != "text" {
			t.Fatalf("one long message: %d bytes, truncated %v", len(got.Body), got.Truncated)
		}
		b.call(t, "POST", fmt.Sprintf("/v1/rejected/%d/resubmit", ids[1].ID), "").problem(t, http.StatusUnprocessableEntity,
			"only 12 of its 9000000 bytes were stored; resubmit it with a payload")

		// Delete answers the message; then it is gone.
		b.call(t, "DELETE", fmt.Sprintf("/v1/rejected/%d", binary), "").ok(t, http.StatusOK, &got)
		if got.ID != binary || got.Source != "orders" {
			t.Fatalf("deleted: %+v", got)
		}
		b.call(t, "GET", fmt.Sprintf("/v1/rejected/%d", binary), "").problem(t, http.StatusNotFound, fmt.Sprintf("no rejected message %d", binary))
		b.call(t, "DELETE", fmt.Sprintf("/v1/rejected/%d", binary), "").problem(t, http.StatusNotFound, "no rejected message")
		b.call(t, "POST", fmt.Sprintf("/v1/rejected/%d/resubmit", binary), "").problem(t, http.StatusNotFound, "no rejected message")
	})
}

// TestRejectedBadInput: bad ids, filters and bodies are 400 with a clear
// message, on every database, and write nothing.
func TestRejectedBadInput(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		id := b.reject(t, "orders", typeEmail, "/order_id", []byte("nope"), "body is not JSON", `{}`)
		one := fmt.Sprintf("/v1/rejected/%d", id)
		before := b.state(t)
		for _, c := range []struct{ method, path, body, want string }{
			{"GET", "/v1/rejected?limit=0", "", `"limit" must be an integer in 1..1000, got "0"`},
			{"GET", "/v1/rejected?limit=1001", "", `"limit" must be an integer in 1..1000`},
			{"GET", "/v1/rejected?limit=ten", "", `"limit" must be an integer`},
			{"GET", "/v1/rejected?open=yes", "", `"open" must be true or false, got "yes"`},
			{"GET", "/v1/rejected?before=-1", "", `"before" must be a positive message id, got "-1"`},
			{"GET", "/v1/rejected?before=x", "", `"before" must be a positive message id`},
			{"GET", "/v1/rejected?before=5&cursor=" + encodeCursor(5), "", `"cursor" or "before", not both`},
			{"GET", "/v1/rejected?cursor=garbage", "", "invalid cursor"},
			{"GET", "/v1/rejected?state=open", "", `unknown query parameter "state"`},
			{"GET", "/v1/rejected?source=a%00b", "", "NUL"},
			{"GET", "/v1/rejected/abc", "", `invalid rejected message id "abc"`},
			{"GET", "/v1/rejected/0", "", `invalid rejected message id "0"`},
			{"DELETE", "/v1/rejected/-4", "", `invalid rejected message id "-4"`},
			{"POST", "/v1/rejected/x/resubmit", "", `invalid rejected message id "x"`},
			{"POST", one + "/resubmit", `{"payload":{"order_id":1}`, "invalid JSON"},
			{"POST", one + "/resubmit", `{"payload":nope}`, "invalid JSON"},
			{"POST", one + "/resubmit", `{"payload":null}`, `"payload" is null`},
			{"POST", one + "/resubmit", `{"key":""}`, `field "key" must not be empty`},
			{"POST", one + "/resubmit", `{"key":7}`, `field "key" must be a string`},
			{"POST", one + "/resubmit", `{"body":{}}`, `unknown field "body"`},
			{"POST", one + "/resubmit", `[]`, "must be a JSON object"},
			{"POST", one + "/resubmit?force=1", "", `unknown query parameter "force"`},
			{"DELETE", one + "?x=1", "", `unknown query parameter "x"`},
		} {
			b.call(t, c.method, c.path, c.body).problem(t, http.StatusBadRequest, c.want)
		}
		b.call(t, "POST", one+"/resubmit", `{"payload":{}}`, "Content-Type", "text/plain").problem(t, http.StatusUnsupportedMediaType, "Content-Type")
		b.unchanged(t, before)
		var got RejectedRecord
		b.call(t, "GET", one, "").ok(t, http.StatusOK, &got)
		if got.TaskID != 0 {
			t.Fatalf("bad input resolved the message: %+v", got)
		}
	})
}

// TestRejectedRoles: readers list and read rejected messages; only admin
// resubmits and deletes.
func TestRejectedRoles(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		const admin, reader, enqueuer = "admin-token-rejected", "read-token-rejected", "enqueue-token-rejected"
		b := setup(t, db, Options{Tokens: []Token{{Value: admin, Role: RoleAdmin}, {Value: reader, Role: RoleRead}, {Value: enqueuer, Role: RoleEnqueue}}})
		id := b.reject(t, "orders", typeEmail, "/order_id", []byte(`{"order_id":"R1"}`), "body of 17 bytes is over the limit of 1", `{}`)
		one := fmt.Sprintf("/v1/rejected/%d", id)
		auth := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }
		var l RejectedList
		b.call(t, "GET", "/v1/rejected", "", auth(reader)...).ok(t, http.StatusOK, &l)
		b.call(t, "GET", one, "", auth(reader)...).ok(t, http.StatusOK, nil)
		b.call(t, "GET", "/v1/sources", "", auth(reader)...).ok(t, http.StatusOK, nil)
		b.call(t, "GET", "/v1/rejected", "", auth(enqueuer)...).problem(t, http.StatusForbidden, `role "enqueue" may not call GET /v1/rejected`)
		for _, tok := range []string{reader, enqueuer} {
			b.call(t, "POST", one+"/resubmit", "", auth(tok)...).problem(t, http.StatusForbidden, "may not call POST /v1/rejected/{id}/resubmit")
			b.call(t, "DELETE", one, "", auth(tok)...).problem(t, http.StatusForbidden, "may not call DELETE /v1/rejected/{id}")
		}
		b.call(t, "DELETE", one, "", "Authorization", "").problem(t, http.StatusUnauthorized, "bearer token")
		if n := b.taskCount(t); n != 0 {
			t.Fatalf("refused resubmits enqueued %d tasks", n)
		}
		b.call(t, "GET", one, "", auth(reader)...).ok(t, http.StatusOK, nil)
		var task Task
		b.call(t, "POST", one+"/resubmit", "", auth(admin)...).ok(t, http.StatusCreated, &task)
		b.call(t, "DELETE", one, "", auth(admin)...).ok(t, http.StatusOK, nil)
	})
}
