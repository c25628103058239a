package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// nested returns a JSON value nested depth levels of arrays deep.
func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

// badCall is a request the API must refuse without writing anything.
type badCall struct {
	name         string
	method, path string
	body         string
	hdr          []string
	status       int
	detail       string // a part of the problem's detail
}

// refuse sends every call and checks its problem and that the database
// did not change.
func refuse(t *testing.T, b *bundle, calls []badCall) {
	t.Helper()
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			before := b.state(t)
			b.call(t, c.method, c.path, c.body, c.hdr...).problem(t, c.status, c.detail)
			b.unchanged(t, before)
		})
	}
}

func TestEnqueueRejects(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"email.send","payload":{"v":1}}`) // something to leave unchanged
		b.call(t, "POST", "/v1/tasks", `{"type":"email.send","payload":{"v":1}}`, "Idempotency-Key", "held").ok(t, http.StatusCreated, nil)
		post := func(name, body string, status int, detail string, hdr ...string) badCall {
			return badCall{name: name, method: "POST", path: "/v1/tasks", body: body, hdr: hdr, status: status, detail: detail}
		}
		refuse(t, b, []badCall{
			// 415: the Content-Type.
			post("no content type", `{"type":"email.send"}`, 415, "Content-Type must be application/json", "Content-Type", ""),
			post("text/plain", `{"type":"email.send"}`, 415, "application/json", "Content-Type", "text/plain"),
			post("form", `type=email.send`, 415, "application/json", "Content-Type", "application/x-www-form-urlencoded"),
			post("latin1", `{"type":"email.send"}`, 415, "charset", "Content-Type", "application/json; charset=latin1"),
			// 400: the body.
			post("empty body", ``, 400, "empty", "Content-Type", "application/json"),
			post("blank body", " \n\t ", 400, "empty"),
			post("invalid JSON", `{"type":"email.send",}`, 400, "invalid JSON at byte"),
			post("truncated JSON", `{"type":"email.send"`, 400, "unexpected end"),
			post("invalid UTF-8 in a string", "{\"type\":\"email.send\",\"payload\":\"caf\xe9\"}", 400, "not valid UTF-8"),
			post("invalid UTF-8 in a key", "{\"type\":\"email.send\",\"meta\":{\"\xff\":\"x\"}}", 400, "not valid UTF-8"),
			post("not an object", `["email.send"]`, 400, "must be a JSON object"),
			post("null body", `null`, 400, "must be a JSON object"),
			post("trailing object", `{"type":"email.send"} {}`, 400, "after the JSON object"),
			post("trailing garbage", `{"type":"email.send"}x`, 400, "after the JSON object"),
			post("unknown field", `{"type":"email.send","priorty":3}`, 400, `unknown field "priorty"`),
			post("field in the wrong case", `{"Type":"email.send"}`, 400, `unknown field "Type"`),
			post("repeated field", `{"type":"email.send","type":"report.build"}`, 400, `"type" appears more than once`),
			post("type is a number", `{"type":5}`, 400, `field "type" must be a string, got number`),
			post("priority is a string", `{"type":"email.send","priority":"high"}`, 400, `field "priority" must be an integer`),
			post("priority is a fraction", `{"type":"email.send","priority":1.5}`, 400, `field "priority" must be an integer`),
			post("meta holds a number", `{"type":"email.send","meta":{"tenant":1}}`, 400, `field "meta.tenant" must be a string`),
			post("bad delay", `{"type":"email.send","delay":"soon"}`, 400, `field "delay": invalid duration "soon"`),
			post("delay is a number", `{"type":"email.send","delay":30}`, 400, `field "delay": duration must be a string`),
			post("bad run_at", `{"type":"email.send","run_at":"tomorrow"}`, 400, `field "run_at" must be an RFC 3339 time`),
			post("deep payload", `{"type":"email.send","payload":`+nested(64)+`}`, 400, "nested deeper than 64 levels"),
			post("deep unknown field", `{"type":"email.send","x":`+nested(100000)+`}`, 400, "nested deeper than 64 levels"),
			post("payload nested 32 levels", `{"type":"email.send","payload":`+nested(32)+`}`, 400, "payload is nested deeper than 31 levels"),
			// 400: keel's validation, with its message.
			post("no type", `{}`, 400, `invalid task type ""`),
			post("bad type name", `{"type":"send email!"}`, 400, `invalid task type "send email!"`),
			post("unknown type", `{"type":"sms.send"}`, 400, `unknown task type "sms.send"`),
			post("bad queue name", `{"type":"email.send","queue":"a b"}`, 400, `invalid queue name "a b"`),
			post("priority out of range", `{"type":"email.send","priority":2000000}`, 400, "priority 2000000 out of range"),
			post("zero attempts", `{"type":"email.send","max_attempts":0}`, 400, "max attempts must be at least 1"),
			post("negative delay", `{"type":"email.send","delay":"-1s"}`, 400, "negative delay"),
			post("run_at and delay", `{"type":"email.send","delay":"1s","run_at":"2030-01-01T00:00:00Z"}`, 400, "RunAt and Delay are exclusive"),
			post("unique_by and key", `{"type":"email.send","unique_by":"u","idempotency_key":"k"}`, 400, "exclusive"),
			post("keys differ", `{"type":"email.send","idempotency_key":"a"}`, 400, "differ", "Idempotency-Key", "b"),
			post("key too long", `{"type":"email.send"}`, 400, "idempotency key must be 1-255 bytes", "Idempotency-Key", strings.Repeat("k", 256)),
			// 413: the body, and the payload keel accepts.
			post("body too large", `{"type":"email.send","payload":"`+strings.Repeat("x", DefaultMaxBodyBytes)+`"}`, 413, "larger than 1114112 bytes"),
			post("payload too large", `{"type":"email.send","payload":"`+strings.Repeat("x", testPayloadLimit)+`"}`, 413, "payload too large"),
			// 409: the key is held with another payload.
			post("key conflict", `{"type":"email.send","payload":{"v":2}}`, 409, "idempotency key already used with a different payload", "Idempotency-Key", "held"),
			post("key conflict, other type", `{"type":"report.build","payload":{"v":1}}`, 409, "idempotency key", "Idempotency-Key", "held"),
		})
		// Nesting up to the limit is fine: 31 levels of payload, what every
		// database stores (MariaDB refuses 32).
		b.enqueue(t, `{"type":"email.send","payload":`+nested(31)+`}`)
	})
}

func TestBatchRejects(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{MaxBatch: 3})
		b.enqueue(t, `{"type":"email.send"}`)
		post := func(name, body string, status int, detail string, hdr ...string) badCall {
			return badCall{name: name, method: "POST", path: "/v1/tasks/batch", body: body, hdr: hdr, status: status, detail: detail}
		}
		item := `{"type":"email.send"}`
		refuse(t, b, []badCall{
			post("empty", `{"tasks":[]}`, 400, "at least one task"),
			post("no tasks field", `{}`, 400, "at least one task"),
			post("null tasks", `{"tasks":null}`, 400, "at least one task"),
			post("over MaxBatch", `{"tasks":[`+strings.Repeat(item+",", 3)+item+`]}`, 400, "holds 4 tasks, the limit is 3"),
			post("tasks not an array", `{"tasks":{}}`, 400, `field "tasks" must be an array, got an object`),
			post("item not an object", `{"tasks":[1]}`, 400, `field "tasks[0]" must be an object, got a number`),
			post("item with unknown field", `{"tasks":[`+item+`,{"type":"email.send","x":1}]}`, 400, `unknown field "tasks[1].x"`),
			post("item with bad delay", `{"tasks":[`+item+`,`+item+`,{"type":"email.send","delay":"x"}]}`, 400, `field "tasks[2].delay"`),
			post("one bad item writes none", `{"tasks":[`+item+`,{"type":"nope.nope"}]}`, 400, `task 1: unknown task type "nope.nope"`),
			post("one conflict writes none", `{"tasks":[`+item+`,{"type":"email.send","idempotency_key":"k"},{"type":"email.send","payload":1,"idempotency_key":"k"}]}`, 409, "idempotency key"),
			post("header key", `{"tasks":[`+item+`]}`, 400, "give each task of a batch its own idempotency_key", "Idempotency-Key", "k"),
			post("deep", `{"tasks":[{"type":"email.send","payload":`+nested(62)+`}]}`, 400, "nested deeper than 64"),
			post("wrong content type", `{"tasks":[`+item+`]}`, 415, "application/json", "Content-Type", "text/json"),
		})
	})
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{MaxBodyBytes: 64})
		ok := `{"type":"email.send","payload":"` + strings.Repeat("x", 64-34) + `"}`
		if len(ok) != 64 {
			t.Fatalf("len %d", len(ok))
		}
		b.enqueue(t, ok)
		refuse(t, b, []badCall{
			{name: "task", method: "POST", path: "/v1/tasks", body: `{"type":"email.send","payload":"` + strings.Repeat("x", 64-33) + `"}`, status: 413, detail: "larger than 64 bytes"},
			{name: "batch", method: "POST", path: "/v1/tasks/batch", body: `{"tasks":[` + strings.Repeat(`{"type":"email.send"},`, 4) + `{}]}`, status: 413, detail: "larger than 64 bytes"},
			{name: "patch", method: "PATCH", path: "/v1/queues/default", body: `{"paused":true` + strings.Repeat(" ", 64) + `}`, status: 413, detail: "larger than 64 bytes"},
		})
	})
}

func TestTaskRouteErrors(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		pending := b.enqueue(t, `{"type":"email.send"}`)
		done := b.enqueue(t, `{"type":"email.send"}`)
		b.call(t, "POST", fmt.Sprintf("/v1/tasks/%d/cancel", done.ID), "").ok(t, http.StatusOK, nil)
		refuse(t, b, []badCall{
			{name: "get missing", method: "GET", path: "/v1/tasks/999999", status: 404, detail: "task 999999 not found"},
			{name: "get bad id", method: "GET", path: "/v1/tasks/abc", status: 400, detail: `invalid task id "abc"`},
			{name: "get zero id", method: "GET", path: "/v1/tasks/0", status: 400, detail: "invalid task id"},
			{name: "get overflowing id", method: "GET", path: "/v1/tasks/99999999999999999999", status: 400, detail: "invalid task id"},
			{name: "cancel missing", method: "POST", path: "/v1/tasks/999999/cancel", status: 404, detail: "task 999999 not found"},
			{name: "retry missing", method: "POST", path: "/v1/tasks/999999/retry", status: 404, detail: "task 999999 not found"},
			{name: "cancel bad id", method: "POST", path: "/v1/tasks/-1/cancel", status: 400, detail: "invalid task id"},
			{name: "cancel finished", method: "POST", path: fmt.Sprintf("/v1/tasks/%d/cancel", done.ID), status: 409,
				detail: fmt.Sprintf("task %d is cancelled: only pending or running tasks can be cancelled", done.ID)},
			{name: "retry pending", method: "POST", path: fmt.Sprintf("/v1/tasks/%d/retry", pending.ID), status: 409,
				detail: fmt.Sprintf("task %d is pending: only dead or cancelled tasks can be retried", pending.ID)},
			{name: "unknown route", method: "GET", path: "/v1/nothing", status: 404, detail: "no route GET /v1/nothing"},
			{name: "unknown version", method: "POST", path: "/v2/tasks", body: `{}`, status: 404, detail: "no route"},
			{name: "trailing slash", method: "GET", path: "/v1/tasks/", status: 404, detail: "no route"},
			{name: "list: unknown parameter", method: "GET", path: "/v1/tasks?sort=asc", status: 400, detail: `unknown query parameter "sort"`},
			{name: "list: repeated parameter", method: "GET", path: "/v1/tasks?type=a&type=b", status: 400, detail: `"type" given 2 times`},
			{name: "list: bad state", method: "GET", path: "/v1/tasks?state=done", status: 400, detail: `unknown state "done": use pending, running, succeeded, dead or cancelled`},
			{name: "list: bad time", method: "GET", path: "/v1/tasks?created_after=yesterday", status: 400, detail: `"created_after" must be an RFC 3339 time`},
			{name: "list: empty range", method: "GET", path: "/v1/tasks?created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z", status: 400, detail: "created_after must be before created_before"},
			{name: "list: bad finished time", method: "GET", path: "/v1/tasks?finished_before=2026-01-02", status: 400, detail: `"finished_before" must be an RFC 3339 time`},
			{name: "list: empty finished range", method: "GET", path: "/v1/tasks?finished_after=2026-01-02T00:00:00Z&finished_before=2026-01-02T00:00:00Z", status: 400, detail: "finished_after must be before finished_before"},
			{name: "list: limit 0", method: "GET", path: "/v1/tasks?limit=0", status: 400, detail: `"limit" must be an integer in 1..1000`},
			{name: "list: limit too big", method: "GET", path: "/v1/tasks?limit=1001", status: 400, detail: `"limit"`},
			{name: "list: limit not a number", method: "GET", path: "/v1/tasks?limit=ten", status: 400, detail: `"limit"`},
			{name: "list: cursor garbage", method: "GET", path: "/v1/tasks?cursor=zzz", status: 400, detail: `invalid cursor "zzz"`},
			{name: "list: cursor of another shape", method: "GET", path: "/v1/tasks?cursor=" + encodeCursor(5)[2:], status: 400, detail: "invalid cursor"},
			{name: "list: malformed query", method: "GET", path: "/v1/tasks?type=%zz", status: 400, detail: "malformed query string"},
			{name: "list: NUL type", method: "GET", path: "/v1/tasks?type=%00", status: 400, detail: `query parameter "type" contains the NUL character`},
			{name: "list: NUL queue", method: "GET", path: "/v1/tasks?queue=a%00b", status: 400, detail: `query parameter "queue" contains the NUL character`},
			{name: "list: invalid UTF-8 type", method: "GET", path: "/v1/tasks?type=%ff", status: 400, detail: `query parameter "type" is not valid UTF-8`},
			{name: "list: NUL state", method: "GET", path: "/v1/tasks?state=%00", status: 400, detail: `query parameter "state"`},
			{name: "dead: invalid UTF-8 queue", method: "GET", path: "/v1/dead?queue=%ff", status: 400, detail: `query parameter "queue" is not valid UTF-8`},
			{name: "dead: NUL type", method: "GET", path: "/v1/dead?type=x%00", status: 400, detail: `query parameter "type" contains the NUL character`},
			{name: "list: 100 KB state", method: "GET", path: "/v1/tasks?state=" + strings.Repeat("s", 100<<10), status: 400, detail: "unknown state"},
			{name: "unknown route, 100 KB path", method: "GET", path: "/v1/" + strings.Repeat("p", 100<<10), status: 404, detail: "no route"},
			{name: "dead: bad time", method: "GET", path: "/v1/dead?finished_after=yesterday", status: 400, detail: `"finished_after" must be an RFC 3339 time`},
			{name: "dead: empty range", method: "GET", path: "/v1/dead?finished_after=2026-01-02T00:00:00Z&finished_before=2026-01-01T00:00:00Z", status: 400, detail: "finished_after must be before finished_before"},
			{name: "dead: created filter", method: "GET", path: "/v1/dead?created_after=2026-01-01T00:00:00Z", status: 400, detail: `unknown query parameter "created_after"`},
			{name: "dead: unknown parameter", method: "GET", path: "/v1/dead?state=pending", status: 400, detail: `unknown query parameter "state"`},
			{name: "stats: parameter", method: "GET", path: "/v1/stats?x=1", status: 400, detail: `unknown query parameter "x"`},
		})
	})
}

func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"email.send"}`)
		for _, c := range []struct {
			method, path, allow string
		}{
			{"DELETE", "/v1/tasks", "GET, HEAD, POST"},
			{"PUT", "/v1/tasks/1", "GET, HEAD"},
			{"GET", "/v1/tasks/1/cancel", "POST"},
			{"GET", "/v1/tasks/batch", ""}, // matches GET /v1/tasks/{id}: an invalid id
			{"POST", "/v1/stats", "GET, HEAD"},
			{"DELETE", "/v1/queues/default", "PATCH"},
			{"POST", "/healthz", "GET, HEAD"},
		} {
			before := b.state(t)
			res := b.call(t, c.method, c.path, `{}`)
			if c.allow == "" {
				res.problem(t, http.StatusBadRequest, "invalid task id")
				continue
			}
			res.problem(t, http.StatusMethodNotAllowed, "method "+c.method+" is not allowed")
			if got := res.header.Get("Allow"); got != c.allow {
				t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
			}
			b.unchanged(t, before)
		}
	})
}

func TestInternalErrorIsGeneric(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		task := b.enqueue(t, `{"type":"email.send"}`)
		b.close()
		p := b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", task.ID), "").problem(t, http.StatusInternalServerError, "internal error")
		if strings.Contains(p.Detail, "closed") || strings.Contains(p.Detail, "sql") {
			t.Fatalf("500 detail leaks the cause: %q", p.Detail)
		}
		b.call(t, "GET", "/readyz", "").problem(t, http.StatusServiceUnavailable, "the database did not answer")
		var h Health
		b.call(t, "GET", "/healthz", "").ok(t, http.StatusOK, &h)
		if h.Status != "ok" {
			t.Fatalf("healthz %+v", h)
		}
	})
}
