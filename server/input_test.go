package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// TestEnqueueRefusesUnstorable: input that one database refuses and
// another stores, or that would be stored changed, gets the same 400
// naming the field on SQLite, PostgreSQL and MariaDB, and writes nothing.
func TestEnqueueRefusesUnstorable(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"email.send","payload":{"v":1}}`)
		post := func(name, body string, detail string, hdr ...string) badCall {
			return badCall{name: name, method: "POST", path: "/v1/tasks", body: body, hdr: hdr, status: 400, detail: detail}
		}
		batch := func(name, item string, detail string) badCall {
			return badCall{name: "batch: " + name, method: "POST", path: "/v1/tasks/batch", body: `{"tasks":[{"type":"email.send"},` + item + `]}`, status: 400, detail: detail}
		}
		refuse(t, b, []badCall{
			// NUL: PostgreSQL refuses it in text and JSON.
			post("NUL in payload", `{"type":"email.send","payload":{"s":"a\u0000b"}}`, "payload contains the NUL character"),
			post("NUL in a payload key", `{"type":"email.send","payload":{"\u0000":1}}`, "payload contains the NUL character"),
			post("NUL in a meta value", `{"type":"email.send","meta":{"k":"\u0000"}}`, `meta "k" contains the NUL character`),
			post("NUL in a meta key", `{"type":"email.send","meta":{"k\u0000":"v"}}`, "meta key contains the NUL character"),
			post("NUL in idempotency_key", `{"type":"email.send","idempotency_key":"k\u0000"}`, "idempotency key contains the NUL character"),
			post("non-UTF-8 Idempotency-Key header", `{"type":"email.send"}`, "idempotency key is not valid UTF-8", "Idempotency-Key", "k\xff"),
			// Numbers beyond PostgreSQL's numeric.
			post("huge number", `{"type":"email.send","payload":{"n":1e400000}}`, "payload: number \"1e400000\" is out of range"),
			post("tiny number", `{"type":"email.send","payload":[1e-400000]}`, "payload: number \"1e-400000\" is out of range"),
			// Stored changed: a lone surrogate became U+FFFD, repeated keys
			// collapsed to the last.
			post("lone surrogate", `{"type":"email.send","payload":"\ud800"}`, `payload contains a lone UTF-16 surrogate \ud800`),
			post("lone low surrogate", `{"type":"email.send","payload":{"s":"x\udfff"}}`, `payload contains a lone UTF-16 surrogate \udfff`),
			post("repeated payload key", `{"type":"email.send","payload":{"a":1,"a":2}}`, `payload: key "a" appears more than once`),
			post("repeated nested payload key", `{"type":"email.send","payload":{"x":[{"b":1,"b":1}]}}`, `payload: key "b" appears more than once`),
			// Empty means absent no more: the document says minLength 1.
			post("empty queue", `{"type":"email.send","queue":""}`, `field "queue" must not be empty`),
			post("empty unique_by", `{"type":"email.send","unique_by":""}`, `field "unique_by" must not be empty`),
			post("empty idempotency_key", `{"type":"email.send","idempotency_key":""}`, `field "idempotency_key" must not be empty`),
			post("null meta value", `{"type":"email.send","meta":{"k":null}}`, `field "meta.k" must be a string, got null`),
			// Long input is named, not echoed whole.
			post("type of 1 MB", `{"type":"`+strings.Repeat("t", 1<<20)+`"}`, "invalid task type"),
			post("queue of 1 MB", `{"type":"email.send","queue":"`+strings.Repeat("q", 1<<20)+`"}`, "invalid queue name"),
			post("meta key of 100 KB holding null", `{"type":"email.send","meta":{"`+strings.Repeat("m", 100<<10)+`":null}}`, "must be a string, got null"),
			post("delay of 100 KB", `{"type":"email.send","delay":"`+strings.Repeat("1", 100<<10)+`"}`, "invalid duration"),
			{name: "content type of 10 KB", method: "POST", path: "/v1/tasks", body: `{"type":"email.send"}`,
				hdr: []string{"Content-Type", "text/" + strings.Repeat("c", 10<<10)}, status: 415, detail: "Content-Type must be application/json"},
			{name: "charset of 10 KB", method: "POST", path: "/v1/tasks", body: `{"type":"email.send"}`,
				hdr: []string{"Content-Type", "application/json; charset=" + strings.Repeat("c", 10<<10)}, status: 415, detail: "charset must be utf-8"},
			batch("NUL in payload", `{"type":"email.send","payload":"\u0000"}`, "task 1: payload contains the NUL character"),
			batch("empty queue", `{"type":"email.send","queue":""}`, `field "tasks[1].queue" must not be empty`),
			batch("huge number", `{"type":"email.send","payload":-1e400000}`, "task 1: payload: number"),
			{name: "purge: NUL type", method: "POST", path: "/v1/dead/purge", body: `{"type":"\u0000"}`, status: 400, detail: "invalid task type"},
			{name: "pause: queue of 100 KB", method: "POST", path: "/v1/queues/" + strings.Repeat("q", 100<<10) + "/pause", status: 400, detail: "invalid queue name"},
		})
	})
}

// rawResponse sends req, a whole HTTP/1.1 request as written on the wire,
// to the bundle's server and reads the first response (a 1xx included).
func (b *bundle) rawResponse(t *testing.T, req string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a fresh connection
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("read the response: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// rawPost sends a POST with the given extra header lines (each ending in
// CRLF) and body, written by hand so that a header can be empty or
// repeated, and reads the answer whole.
func (b *bundle) rawPost(t *testing.T, path, headers, body string) result {
	t.Helper()
	resp := b.rawResponse(t, "POST "+path+" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n"+headers+"\r\n"+body)
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: data}
}

// TestIdempotencyKeyHeaderMustBeOneKey: an empty, blank or repeated
// Idempotency-Key header is refused, never ignored or chosen between.
func TestIdempotencyKeyHeaderMustBeOneKey(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"email.send"}`)
		for _, tc := range []struct{ name, path, headers, detail string }{
			{"empty", "/v1/tasks", "Idempotency-Key:\r\n", "Idempotency-Key header is empty"},
			{"blank", "/v1/tasks", "Idempotency-Key:    \r\n", "Idempotency-Key header is empty"},
			{"twice", "/v1/tasks", "Idempotency-Key: a\r\nIdempotency-Key: b\r\n", "Idempotency-Key header is given 2 times"},
			{"twice the same", "/v1/tasks", "Idempotency-Key: a\r\nIdempotency-Key: a\r\n", "given 2 times"},
			{"empty on a batch", "/v1/tasks/batch", "Idempotency-Key:\r\n", "give each task of a batch its own idempotency_key"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body := `{"type":"email.send"}`
				if strings.HasSuffix(tc.path, "batch") {
					body = `{"tasks":[` + body + `]}`
				}
				before := b.state(t)
				b.rawPost(t, tc.path, tc.headers, body).problem(t, http.StatusBadRequest, tc.detail)
				b.unchanged(t, before)
			})
		}
		// One key, sent once, still works.
		b.rawPost(t, "/v1/tasks", "Idempotency-Key: a\r\n", `{"type":"email.send"}`).ok(t, http.StatusCreated, nil)
	})
}

// TestBodyOverLimitRefusedBeforeContinue: a request that announces a body
// over the limit and waits for 100 Continue is answered 413 at once.
func TestBodyOverLimitRefusedBeforeContinue(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{MaxBodyBytes: 1024})
	resp := b.rawResponse(t, "POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
		"Content-Length: 2000000\r\nExpect: 100-continue\r\n\r\n")
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413 before the body is sent", resp.StatusCode)
	}
	data, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(data), "larger than 1024 bytes") {
		t.Fatalf("body %s", data)
	}
	if n := b.taskCount(t); n != 0 {
		t.Fatalf("%d tasks written", n)
	}
}

// TestPayloadOfExactlyTheLimit: with the default limits a payload of
// exactly keel's documented 1 MiB is accepted over the API, one byte more
// is refused as a payload (not as a body) too large.
func TestPayloadOfExactlyTheLimit(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{}, func(c *keel.Config) { c.MaxPayloadBytes = 0 })
		exact := `"` + strings.Repeat("x", 1<<20-2) + `"`
		task := b.enqueue(t, `{"type":"email.send","meta":{"tenant":"t1"},"idempotency_key":"`+strings.Repeat("k", 255)+`","payload":`+exact+`}`)
		if len(task.Payload) != 1<<20 {
			t.Fatalf("payload of %d bytes stored, want %d", len(task.Payload), 1<<20)
		}
		before := b.state(t)
		b.call(t, "POST", "/v1/tasks", `{"type":"email.send","payload":"x`+exact[1:]+`}`).problem(t, http.StatusRequestEntityTooLarge, "payload too large: 1048577 bytes, the limit is 1048576")
		b.unchanged(t, before)
	})
}

// TestHostWithoutTokens: without tokens only requests addressed to a
// loopback name or address are answered (DNS rebinding); with tokens any
// Host is.
func TestHostWithoutTokens(t *testing.T) {
	t.Parallel()
	open := setup(t, "sqlite", Options{})
	open.enqueue(t, `{"type":"email.send"}`)
	hosts := func(b *bundle, host string) result {
		t.Helper()
		req, err := http.NewRequest("GET", b.url+"/v1/tasks", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if b.token != "" {
			req.Header.Set("Authorization", "Bearer "+b.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, header: resp.Header, body: data}
	}
	for _, host := range []string{"localhost", "localhost:7400", "LocalHost.", "127.0.0.1", "127.0.0.1:80", "127.1.2.3:7400", "[::1]", "[::1]:7400", "[::ffff:127.0.0.1]:1"} {
		hosts(open, host).ok(t, http.StatusOK, nil)
	}
	for _, host := range []string{"evil.example", "evil.example:7400", "localhost.evil.example", "127.0.0.1.evil.example", "10.0.0.1:7400", "[::2]:7400", "0.0.0.0", strings.Repeat("h", 4096)} {
		before := open.state(t)
		hosts(open, host).problem(t, http.StatusForbidden, "is not a loopback name or address")
		open.unchanged(t, before)
	}
	// Every route, public ones and state changes included.
	req, _ := http.NewRequest("POST", open.url+"/v1/dead/purge", strings.NewReader(`{}`))
	req.Host = "rebound.example"
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("purge through a rebound host: status %d, want 403", resp.StatusCode)
	}

	guarded := setup(t, "sqlite", Options{Tokens: []Token{{Value: "secret", Role: RoleAdmin}}})
	hosts(guarded, "keel.example.com").ok(t, http.StatusOK, nil)
}

// TestTimeFiltersOutOfRange: every time filter gets the range run_at has
// (the years 1000 to 9999, UTC): a time outside it is a 400 naming the
// parameter on SQLite, PostgreSQL and MariaDB alike, and changes nothing
// (MariaDB answered 500 to year 0).
func TestTimeFiltersOutOfRange(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"email.send"}`)
		var calls []badCall
		for _, v := range []string{"0000-01-01T00:00:00Z", "0999-12-31T23:59:59.999999Z", "1000-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00"} {
			enc := url.QueryEscape(v)
			for _, get := range []struct{ path, param string }{
				{"/v1/tasks", "created_after"}, {"/v1/tasks", "created_before"},
				{"/v1/tasks", "finished_after"}, {"/v1/tasks", "finished_before"},
				{"/v1/dead", "finished_after"}, {"/v1/dead", "finished_before"},
				{"/v1/alerts", "fired_after"},
			} {
				calls = append(calls, badCall{name: get.path + " " + get.param + " " + v, method: "GET",
					path: get.path + "?" + get.param + "=" + enc, status: 400, detail: "out of range"})
			}
			for _, op := range []string{"requeue", "purge"} {
				for _, field := range []string{"finished_after", "finished_before"} {
					calls = append(calls, badCall{name: op + " " + field + " " + v, method: "POST", path: "/v1/dead/" + op,
						body: `{"` + field + `":"` + v + `"}`, status: 400, detail: "out of range"})
				}
			}
		}
		refuse(t, b, calls)
		// The edges themselves are in range.
		b.call(t, "GET", "/v1/tasks?finished_after=1000-01-01T00:00:00Z&finished_before=9999-12-31T23:59:59.999999Z", "").ok(t, http.StatusOK, nil)
		b.call(t, "GET", "/v1/alerts?fired_after=1000-01-01T00:00:00Z", "").ok(t, http.StatusOK, nil)
		b.call(t, "POST", "/v1/dead/purge", `{"finished_after":"1000-01-01T00:00:00Z"}`).ok(t, http.StatusOK, nil)
	})
}

// TestLoneSurrogatesRefused: a lone UTF-16 surrogate in any string of a
// request body is refused with 400 naming the field, as in a payload,
// instead of being stored as U+FFFD, where "\ud800" and "\ufffd" would
// be one key. Nothing is written.
func TestLoneSurrogatesRefused(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		held := b.enqueue(t, `{"type":"email.send","unique_by":"\ufffd","meta":{"\ufffd":"\ufffd"}}`)
		post := func(name, body, detail string) badCall {
			return badCall{name: name, method: "POST", path: "/v1/tasks", body: body, status: 400, detail: detail}
		}
		refuse(t, b, []badCall{
			post("unique_by", `{"type":"email.send","unique_by":"\ud800"}`, `field "unique_by" contains a lone UTF-16 surrogate \ud800`),
			post("idempotency_key", `{"type":"email.send","idempotency_key":"k\udfff"}`, `field "idempotency_key" contains a lone UTF-16 surrogate \udfff`),
			post("meta value", `{"type":"email.send","meta":{"k":"\udbff"}}`, `field "meta.k" contains a lone UTF-16 surrogate \udbff`),
			post("meta key", `{"type":"email.send","meta":{"\ud800":"v"}}`, `field "meta" has a key with a lone UTF-16 surrogate \ud800`),
			post("high surrogate before a non-surrogate escape", `{"type":"email.send","unique_by":"\ud800\u0041"}`, `lone UTF-16 surrogate \ud800`),
			{name: "batch unique_by", method: "POST", path: "/v1/tasks/batch", status: 400,
				body: `{"tasks":[{"type":"email.send"},{"type":"email.send","unique_by":"\ud800"}]}`, detail: `field "tasks[1].unique_by" contains a lone UTF-16 surrogate`},
			{name: "resubmit key", method: "POST", path: "/v1/rejected/1/resubmit", status: 400,
				body: `{"key":"\ud800"}`, detail: `field "key" contains a lone UTF-16 surrogate \ud800`},
		})
		// A paired surrogate is a character like any other.
		pair := b.enqueue(t, `{"type":"email.send","unique_by":"\ud83d\ude00","meta":{"\ud83d\ude00":"\ud83d\ude00"}}`)
		var meta map[string]string
		if pair.ID == held.ID || json.Unmarshal(pair.Meta, &meta) != nil || meta["😀"] != "😀" {
			t.Fatalf("paired surrogates: task %+v (held %d)", pair, held.ID)
		}
	})
}

// TestSettingsKeepTheirRules: a runtime setting the configuration file
// would refuse is refused by the API too, with the same rule, and one the
// database would store changed (1ns kept as 1ms) is refused rather than
// changed; nothing is stored, on every database.
func TestSettingsKeepTheirRules(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.call(t, "PATCH", "/v1/types/report.build", `{"concurrency":3}`).ok(t, http.StatusOK, nil) // a setting to leave unchanged
		patch := func(name, path, body, detail string) badCall {
			return badCall{name: name, method: "PATCH", path: path, body: body, status: 400, detail: detail}
		}
		refuse(t, b, []badCall{
			patch("dead_per_hour -2", "/v1/alerts/rules", `{"dead_per_hour":-2}`, "dead_per_hour must be -1 (off) or more, got -2"),
			patch("failure_window 2h", "/v1/alerts/rules", `{"failure_window":"2h"}`, `failure_window must be in 1m..1h (the history keeps minutes; stats read the last hour), got "2h"`),
			patch("backoff_base 1ns", "/v1/types/report.build", `{"backoff_base":"1ns"}`, `backoff_base must be in 1ms..168h, got "1ns"`),
			patch("backoff_base 1.5ms", "/v1/types/report.build", `{"backoff_base":"1500us"}`, `backoff_base must be a whole number of milliseconds (settings are stored in ms), got "1.5ms"`),
			patch("backoff_max 169h", "/v1/types/report.build", `{"backoff_max":"169h"}`, `backoff_max must be in 1ms..168h, got "169h"`),
			patch("backoff_base negative", "/v1/types/report.build", `{"backoff_base":"-1s"}`, `backoff_base must be in 1ms..168h, got "-1s"`),
			patch("timeout 1.5ms", "/v1/types/report.build", `{"timeout":"1500us"}`, `timeout must be a whole number of milliseconds`),
			patch("timeout 25h", "/v1/types/report.build", `{"timeout":"25h"}`, `timeout must be in 1ms..24h, got "25h"`),
		})
		var rules AlertRules
		b.call(t, "GET", "/v1/alerts/rules", "").ok(t, http.StatusOK, &rules)
		if rules.Source != "config" || rules.DeadPerHour != 3 {
			t.Fatalf("refused alert rules were stored: %+v", rules)
		}
		// What the rules allow is stored as sent.
		b.call(t, "PATCH", "/v1/alerts/rules", `{"dead_per_hour":-1}`).ok(t, http.StatusOK, &rules)
		if rules.DeadPerHour != -1 || rules.Source != "runtime" {
			t.Fatalf("rules %+v", rules)
		}
		var typ TaskType
		b.call(t, "PATCH", "/v1/types/report.build", `{"backoff_base":"1ms","backoff_max":"168h","timeout":"24h"}`).ok(t, http.StatusOK, &typ)
		if time.Duration(*typ.BackoffBase) != time.Millisecond || time.Duration(*typ.BackoffMax) != 168*time.Hour || time.Duration(*typ.Timeout) != 24*time.Hour {
			t.Fatalf("type %+v", typ)
		}
	})
}
