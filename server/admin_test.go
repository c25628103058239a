package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// startWorker starts a worker client on b's database for the queues
// "default" and "other" with handlers for both test types, stopped when
// the test ends.
func startWorker(t *testing.T, b *bundle, fn func(ctx context.Context, task *keel.Task[json.RawMessage]) error) *keel.Client {
	t.Helper()
	h := keel.NewHandlers()
	keel.Handle(h, typeEmail, fn)
	keel.Handle(h, typeReport, fn)
	w, err := keel.NewClient(keel.Config{
		Driver: b.drv, Handlers: h, Logger: b.log, PollInterval: 20 * time.Millisecond,
		Queues: map[string]keel.QueueConfig{"default": {}, "other": {}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopWorker(t, w) })
	return w
}

func stopWorker(t *testing.T, w *keel.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.Stop(ctx) //nolint:errcheck // always nil
}

// deadLetters enqueues bodies through the API, has a worker dead-letter
// every one of them and returns their ids.
func deadLetters(t *testing.T, b *bundle, bodies ...string) []int64 {
	t.Helper()
	w := startWorker(t, b, func(ctx context.Context, task *keel.Task[json.RawMessage]) error {
		return keel.Permanent(errors.New("refused by the test"))
	})
	var ids []int64
	for _, body := range bodies {
		ids = append(ids, b.enqueue(t, body).ID)
	}
	for _, id := range ids {
		waitState(t, b, id, "dead")
	}
	stopWorker(t, w)
	return ids
}

// waitState waits until task id is in state.
func waitState(t *testing.T, b *bundle, id int64, state string) Task {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var task Task
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), "").ok(t, http.StatusOK, &task)
		if task.State == state {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %d still %s after 20s, want %s", id, task.State, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ids(l TaskList) []int64 {
	out := make([]int64, len(l.Tasks))
	for i, task := range l.Tasks {
		out[i] = task.ID
	}
	return out
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		mark := time.Now().Add(-time.Second)
		dead := deadLetters(t, b,
			`{"type":"email.send","payload":1}`, `{"type":"email.send","payload":2}`,
			`{"type":"report.build"}`, `{"type":"email.send","queue":"other"}`)
		pending := b.enqueue(t, `{"type":"email.send","queue":"idle"}`)

		var l TaskList
		b.call(t, "GET", "/v1/dead", "").ok(t, http.StatusOK, &l)
		want := slices.Clone(dead)
		slices.Reverse(want)
		if !slices.Equal(ids(l), want) {
			t.Fatalf("dead %v, want %v", ids(l), want)
		}
		if l.Tasks[0].Errors[0].Outcome != "permanent" || l.Tasks[0].Errors[0].Error == "" {
			t.Fatalf("dead letter's history %+v", l.Tasks[0].Errors)
		}
		b.call(t, "GET", "/v1/dead?type=report.build", "").ok(t, http.StatusOK, &l)
		if !slices.Equal(ids(l), []int64{dead[2]}) {
			t.Fatalf("dead by type: %v", ids(l))
		}
		b.call(t, "GET", "/v1/dead?queue=other", "").ok(t, http.StatusOK, &l)
		if !slices.Equal(ids(l), []int64{dead[3]}) {
			t.Fatalf("dead by queue: %v", ids(l))
		}
		if got, pages := walk(t, b, "/v1/dead?limit=3"); len(got) != 4 || pages != 2 {
			t.Fatalf("dead pages: %v in %d pages", got, pages)
		}
		// Finish-time bounds: after inclusive, before exclusive, checked at
		// each dead letter's own finished_at.
		b.call(t, "GET", "/v1/dead", "").ok(t, http.StatusOK, &l)
		for _, task := range l.Tasks {
			at := url.QueryEscape(task.FinishedAt.Format(time.RFC3339Nano))
			var atOrAfter, before []int64
			for _, o := range l.Tasks {
				if o.FinishedAt.Before(*task.FinishedAt) {
					before = append(before, o.ID)
				} else {
					atOrAfter = append(atOrAfter, o.ID)
				}
			}
			var got TaskList
			b.call(t, "GET", "/v1/dead?finished_after="+at, "").ok(t, http.StatusOK, &got)
			if !slices.Equal(ids(got), atOrAfter) {
				t.Fatalf("dead finished_after %s: %v, want %v", at, ids(got), atOrAfter)
			}
			b.call(t, "GET", "/v1/dead?finished_before="+at, "").ok(t, http.StatusOK, &got)
			if !slices.Equal(ids(got), before) {
				t.Fatalf("dead finished_before %s: %v, want %v", at, ids(got), before)
			}
		}
		since := url.QueryEscape(mark.UTC().Format(time.RFC3339Nano))
		soon := url.QueryEscape(time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano))
		b.call(t, "GET", "/v1/dead?finished_after="+since+"&finished_before="+soon, "").ok(t, http.StatusOK, &l)
		if !slices.Equal(ids(l), want) {
			t.Fatalf("dead in a window around them: %v, want %v", ids(l), want)
		}
		b.call(t, "GET", "/v1/dead?type=report.build&finished_after="+since, "").ok(t, http.StatusOK, &l)
		if !slices.Equal(ids(l), []int64{dead[2]}) {
			t.Fatalf("dead by type and finish time: %v", ids(l))
		}
		b.call(t, "GET", "/v1/dead?finished_before="+since, "").ok(t, http.StatusOK, &l)
		if len(l.Tasks) != 0 {
			t.Fatalf("dead before any died: %v", ids(l))
		}
		b.call(t, "GET", "/v1/dead?finished_after="+soon, "").ok(t, http.StatusOK, &l)
		if len(l.Tasks) != 0 {
			t.Fatalf("dead after now: %v", ids(l))
		}

		var n BulkResponse
		b.call(t, "POST", "/v1/dead/requeue", `{"type":"report.build"}`).ok(t, http.StatusOK, &n)
		if n.Count != 1 {
			t.Fatalf("requeued %d, want 1", n.Count)
		}
		if task := waitState(t, b, dead[2], "pending"); task.Attempt != 0 {
			t.Fatalf("requeued task %+v", task)
		}
		b.call(t, "POST", "/v1/dead/purge", `{"queue":"other"}`).ok(t, http.StatusOK, &n)
		if n.Count != 1 {
			t.Fatalf("purged %d, want 1", n.Count)
		}
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", dead[3]), "").problem(t, http.StatusNotFound, "not found")
		// A page at a time, until 0.
		for i, want := range []int64{1, 1, 0} {
			b.call(t, "POST", "/v1/dead/requeue", `{"limit":1,"finished_before":"2100-01-01T00:00:00Z"}`).ok(t, http.StatusOK, &n)
			if n.Count != want {
				t.Fatalf("requeue call %d moved %d, want %d", i, n.Count, want)
			}
		}
		// Cancelled tasks too, when asked.
		b.call(t, "POST", fmt.Sprintf("/v1/tasks/%d/cancel", pending.ID), "").ok(t, http.StatusOK, nil)
		b.call(t, "POST", "/v1/dead/purge", `{"state":"cancelled"}`).ok(t, http.StatusOK, &n)
		if n.Count != 1 {
			t.Fatalf("purged %d cancelled, want 1", n.Count)
		}

		post := func(name, path, body string, status int, detail string, hdr ...string) badCall {
			return badCall{name: name, method: "POST", path: path, body: body, hdr: hdr, status: status, detail: detail}
		}
		b.call(t, "POST", fmt.Sprintf("/v1/tasks/%d/cancel", b.enqueue(t, `{"type":"email.send"}`).ID), "").ok(t, http.StatusOK, nil)
		var calls []badCall
		for _, path := range []string{"/v1/dead/requeue", "/v1/dead/purge"} {
			calls = append(calls,
				post(path+" pending", path, `{"state":"pending"}`, 400, `filter state must be dead or cancelled, got "pending"`),
				post(path+" negative limit", path, `{"state":"cancelled","limit":-1}`, 400, "must be in 1..10000, got -1"),
				post(path+" huge limit", path, `{"state":"cancelled","limit":20000}`, 400, "limit must be in 1..10000, got 20000"),
				post(path+" empty range", path, `{"state":"cancelled","finished_after":"2026-01-02T00:00:00Z","finished_before":"2026-01-01T00:00:00Z"}`, 400, "finished_after must be before finished_before"),
				post(path+" bad time", path, `{"state":"cancelled","finished_after":"monday"}`, 400, `field "finished_after" must be an RFC 3339 time`),
				post(path+" bad type", path, `{"state":"cancelled","type":"a b"}`, 400, `invalid task type "a b"`),
				post(path+" bad queue", path, `{"state":"cancelled","queue":"a/b"}`, 400, `invalid queue name "a/b"`),
				post(path+" unknown field", path, `{"state":"cancelled","typ":"x"}`, 400, `unknown field "typ"`),
				post(path+" empty body", path, ``, 400, "empty", "Content-Type", "application/json"),
				post(path+" no content type", path, `{"state":"cancelled"}`, 415, "application/json", "Content-Type", ""),
			)
		}
		refuse(t, b, calls)
	})
}

func TestQueues(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"email.send","queue":"mail"}`)
		b.enqueue(t, `{"type":"email.send","queue":"mail"}`)

		var l QueueList
		b.call(t, "GET", "/v1/queues", "").ok(t, http.StatusOK, &l)
		if len(l.Queues) != 2 || l.Queues[0].Name != "default" || l.Queues[1].Name != "mail" ||
			l.Queues[1].Counts["pending"] != 2 || l.Queues[1].Paused || l.Queues[0].Counts == nil {
			t.Fatalf("queues %+v", l.Queues)
		}

		var q Queue
		b.call(t, "POST", "/v1/queues/mail/pause", "").ok(t, http.StatusOK, &q)
		if q.Name != "mail" || !q.Paused || q.UpdatedAt == nil {
			t.Fatalf("paused queue %+v", q)
		}
		b.call(t, "PATCH", "/v1/queues/mail", `{"concurrency":5}`).ok(t, http.StatusOK, &q)
		if !q.Paused || q.Concurrency != 5 {
			t.Fatalf("patched queue %+v", q)
		}
		b.call(t, "POST", "/v1/queues/mail/resume", "").ok(t, http.StatusOK, &q)
		if q.Paused || q.Concurrency != 5 {
			t.Fatalf("resumed queue %+v", q)
		}
		b.call(t, "GET", "/v1/queues", "").ok(t, http.StatusOK, &l)
		if l.Queues[1].Paused || l.Queues[1].Concurrency != 5 || l.Queues[1].Counts["pending"] != 2 {
			t.Fatalf("queues after changes %+v", l.Queues)
		}
		b.call(t, "PATCH", "/v1/queues/mail", `{"concurrency":0,"paused":true}`).ok(t, http.StatusOK, &q)
		if !q.Paused || q.Concurrency != 0 {
			t.Fatalf("cleared concurrency %+v", q)
		}
		// A queue that holds nothing yet can be configured ahead.
		b.call(t, "POST", "/v1/queues/later/pause", "").ok(t, http.StatusOK, &q)

		patch := func(name, path, body string, status int, detail string, hdr ...string) badCall {
			return badCall{name: name, method: "PATCH", path: path, body: body, hdr: hdr, status: status, detail: detail}
		}
		refuse(t, b, []badCall{
			patch("nothing to change", "/v1/queues/mail", `{}`, 400, "nothing to change"),
			patch("negative concurrency", "/v1/queues/mail", `{"concurrency":-1}`, 400, "concurrency must be in 0..10000, got -1"),
			patch("concurrency as a string", "/v1/queues/mail", `{"concurrency":"5"}`, 400, `field "concurrency" must be an integer, got string`),
			patch("paused as a string", "/v1/queues/mail", `{"paused":"yes"}`, 400, `field "paused" must be true or false, got string`),
			patch("unknown field", "/v1/queues/mail", `{"max_workers":3}`, 400, `unknown field "max_workers"`),
			patch("bad name", "/v1/queues/a%20b", `{"paused":true}`, 400, `invalid queue name "a b"`),
			patch("empty body", "/v1/queues/mail", ``, 400, "empty", "Content-Type", "application/json"),
			patch("wrong content type", "/v1/queues/mail", `{"paused":true}`, 415, "application/json", "Content-Type", "text/plain"),
			{name: "pause bad name", method: "POST", path: "/v1/queues/-x/pause", status: 400, detail: `invalid queue name "-x"`},
			{name: "list with a parameter", method: "GET", path: "/v1/queues?name=mail", status: 400, detail: "unknown query parameter"},
		})
	})
}

func TestTypes(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"report.build"}`)

		var l TypeList
		b.call(t, "GET", "/v1/types", "").ok(t, http.StatusOK, &l)
		if len(l.Types) != 2 || l.Types[0].Name != typeEmail || l.Types[1].Name != typeReport ||
			l.Types[1].Counts["pending"] != 1 || l.Types[0].Timeout != nil || l.Types[0].Counts == nil {
			t.Fatalf("types %+v", l.Types)
		}

		var typ TaskType
		b.call(t, "PATCH", "/v1/types/report.build", `{"timeout":"2m","max_attempts":7,"backoff_base":"10s","backoff_max":"5m"}`).ok(t, http.StatusOK, &typ)
		if typ.Name != typeReport || typ.Paused || typ.Timeout == nil || time.Duration(*typ.Timeout) != 2*time.Minute || typ.MaxAttempts != 7 ||
			time.Duration(*typ.BackoffBase) != 10*time.Second || time.Duration(*typ.BackoffMax) != 5*time.Minute || typ.UpdatedAt == nil {
			t.Fatalf("patched type %+v", typ)
		}
		b.call(t, "PATCH", "/v1/types/report.build", `{"concurrency":3}`).ok(t, http.StatusOK, &typ)
		if typ.Concurrency != 3 || typ.MaxAttempts != 7 || typ.Timeout == nil {
			t.Fatalf("type with concurrency %+v", typ)
		}
		b.call(t, "POST", "/v1/types/report.build/pause", "").ok(t, http.StatusOK, &typ)
		if !typ.Paused || typ.MaxAttempts != 7 || typ.Concurrency != 3 {
			t.Fatalf("paused type %+v", typ)
		}
		b.call(t, "POST", "/v1/types/report.build/resume", "").ok(t, http.StatusOK, &typ)
		if typ.Paused {
			t.Fatalf("resumed type %+v", typ)
		}
		b.call(t, "PATCH", "/v1/types/report.build", `{"timeout":"0s","max_attempts":0}`).ok(t, http.StatusOK, &typ)
		if typ.Timeout != nil || typ.MaxAttempts != 0 || typ.BackoffBase == nil {
			t.Fatalf("cleared overrides %+v", typ)
		}
		b.call(t, "GET", "/v1/types", "").ok(t, http.StatusOK, &l)
		if got := l.Types[1]; got.BackoffBase == nil || got.Timeout != nil || got.Concurrency != 3 || got.Counts["pending"] != 1 ||
			l.Types[0].Concurrency != 0 {
			t.Fatalf("types after changes %+v", l.Types)
		}
		b.call(t, "PATCH", "/v1/types/report.build", `{"concurrency":0}`).ok(t, http.StatusOK, &typ)
		if typ.Concurrency != 0 || typ.BackoffBase == nil {
			t.Fatalf("cleared concurrency %+v", typ)
		}
		b.call(t, "GET", "/v1/types", "").ok(t, http.StatusOK, &l)
		if got := l.Types[1]; got.Concurrency != 0 || got.BackoffBase == nil {
			t.Fatalf("types after clearing concurrency %+v", l.Types)
		}
		b.call(t, "PATCH", "/v1/types/report.build", `{"concurrency":3}`).ok(t, http.StatusOK, &typ) // something for the refusals to leave unchanged

		patch := func(name, body string, status int, detail string) badCall {
			return badCall{name: name, method: "PATCH", path: "/v1/types/report.build", body: body, status: status, detail: detail}
		}
		refuse(t, b, []badCall{
			patch("nothing to change", `{}`, 400, "nothing to change"),
			patch("bad timeout", `{"timeout":"forever"}`, 400, `field "timeout": invalid duration "forever"`),
			patch("timeout as a number", `{"timeout":30}`, 400, `field "timeout": duration must be a string`),
			patch("tiny timeout", `{"timeout":"1ns"}`, 400, "timeout must be in 1ms..24h"),
			patch("too many attempts", `{"max_attempts":1001}`, 400, "max_attempts must be in 1..1000"),
			patch("negative concurrency", `{"concurrency":-1}`, 400, "concurrency must be in 0..10000, got -1"),
			patch("huge concurrency", `{"concurrency":10001}`, 400, "concurrency must be in 0..10000, got 10001"),
			patch("concurrency as a string", `{"concurrency":"3"}`, 400, `field "concurrency" must be an integer, got string`),
			patch("backoff max below base", `{"backoff_base":"1m","backoff_max":"1s"}`, 400, "must not be below backoff_base"),
			patch("unknown field", `{"queue":"x"}`, 400, `unknown field "queue"`),
			{name: "bad name", method: "PATCH", path: "/v1/types/a%3Fb", body: `{"paused":true}`, status: 400, detail: `invalid task type "a?b"`},
			{name: "pause bad name", method: "POST", path: "/v1/types/%20/pause", status: 400, detail: "invalid task type"},
		})
	})
}

func TestStatsAndNodes(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"email.send"}`)
		b.enqueue(t, `{"type":"email.send","queue":"mail"}`)
		var st Stats
		b.call(t, "GET", "/v1/stats", "").ok(t, http.StatusOK, &st)
		if st.Counts["pending"] != 2 || len(st.Queues) != 2 || st.Queues[1].Name != "mail" || st.Queues[1].Counts["pending"] != 1 ||
			st.Alert || st.Nodes != 0 || time.Since(st.At) > time.Minute {
			t.Fatalf("stats %+v", st)
		}
		// keel's own work is a field of its own, never a queue of queues.
		if k := st.Keel; k.Queue.Name != keel.ReservedQueue || k.Queue.Counts == nil || k.Queue.Types == nil || k.DeliveriesDead != 0 {
			t.Fatalf("stats keel %+v", k)
		}
		var nodes NodeList
		res := b.call(t, "GET", "/v1/nodes", "")
		res.ok(t, http.StatusOK, &nodes)
		if len(nodes.Nodes) != 0 || string(res.body) != "{\"nodes\":[]}\n" {
			t.Fatalf("nodes before any worker: %s", res.body)
		}

		w := startWorker(t, b, func(ctx context.Context, task *keel.Task[json.RawMessage]) error { return nil })
		deadline := time.Now().Add(20 * time.Second)
		for len(nodes.Nodes) == 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			b.call(t, "GET", "/v1/nodes", "").ok(t, http.StatusOK, &nodes)
		}
		if len(nodes.Nodes) != 1 {
			t.Fatalf("nodes %+v, want the worker", nodes.Nodes)
		}
		n := nodes.Nodes[0]
		if n.Name != w.Node() || n.PID == 0 || !slices.Equal(n.Queues, []string{"default", "keel", "other"}) || n.StartedAt.IsZero() || n.HeartbeatAt.IsZero() {
			t.Fatalf("node %+v", n)
		}
		b.call(t, "GET", "/v1/stats", "").ok(t, http.StatusOK, &st)
		if st.Nodes != 1 {
			t.Fatalf("stats count %d nodes, want 1", st.Nodes)
		}
	})
}

func TestHealth(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: []Token{{Value: "secret", Role: RoleAdmin}}})
		b.token = ""
		for _, path := range []string{"/healthz", "/readyz"} {
			var h Health
			b.call(t, "GET", path, "").ok(t, http.StatusOK, &h)
			if h.Status != "ok" {
				t.Fatalf("%s: %+v", path, h)
			}
		}
		res := b.call(t, "GET", "/v1/openapi.json", "")
		var doc map[string]any
		res.ok(t, http.StatusOK, &doc)
		if doc["openapi"] != "3.1.0" {
			t.Fatalf("openapi document %v", doc["openapi"])
		}
	})
}

// TestDeadByIDs: requeue and purge take a list of ids, and touch only the
// listed dead letters.
func TestDeadByIDs(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		dead := deadLetters(t, b, `{"type":"email.send","payload":1}`, `{"type":"email.send","payload":2}`, `{"type":"email.send","payload":3}`)
		pending := b.enqueue(t, `{"type":"email.send","queue":"idle"}`)
		var n BulkResponse
		b.call(t, "POST", "/v1/dead/requeue", fmt.Sprintf(`{"ids":[%d,%d]}`, dead[2], pending.ID)).ok(t, http.StatusOK, &n)
		if n.Count != 1 {
			t.Fatalf("requeued %d, want 1", n.Count)
		}
		waitState(t, b, dead[2], "pending")
		b.call(t, "POST", "/v1/dead/purge", fmt.Sprintf(`{"ids":[%d]}`, dead[1])).ok(t, http.StatusOK, &n)
		if n.Count != 1 {
			t.Fatalf("purged %d, want 1", n.Count)
		}
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", dead[1]), "").problem(t, http.StatusNotFound, "not found")
		waitState(t, b, dead[0], "dead")
		b.call(t, "POST", "/v1/dead/purge", `{"ids":[0]}`).problem(t, http.StatusBadRequest, "positive")
		b.call(t, "POST", "/v1/dead/purge", `{"ids":"1"}`).problem(t, http.StatusBadRequest, "ids")
	})
}

// TestTaskByIdempotencyKey: GET /v1/tasks?idempotency_key= lists the task
// holding the key, or nothing.
func TestTaskByIdempotencyKey(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		task := b.enqueue(t, `{"type":"email.send","idempotency_key":"order 7"}`)
		var l TaskList
		b.call(t, "GET", "/v1/tasks?idempotency_key=order+7", "").ok(t, http.StatusOK, &l)
		if !slices.Equal(ids(l), []int64{task.ID}) {
			t.Fatalf("by key: %v, want [%d]", ids(l), task.ID)
		}
		b.call(t, "GET", "/v1/tasks?idempotency_key=order+8", "").ok(t, http.StatusOK, &l)
		if l.Tasks == nil || len(l.Tasks) != 0 {
			t.Fatalf("unknown key: %+v", l)
		}
		b.call(t, "GET", "/v1/tasks?idempotency_key=order+7&state=pending", "").problem(t, http.StatusBadRequest, "idempotency_key")
		b.call(t, "GET", "/v1/tasks?idempotency_key=", "").problem(t, http.StatusBadRequest, "idempotency key")
	})
}
