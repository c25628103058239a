package server

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestRunAtRange: run_at in the years 1000 to 9999 is accepted; beyond
// either end it is a 400 naming run_at that writes nothing, the same on
// every database.
func TestRunAtRange(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		for _, at := range []string{"1000-01-01T00:00:00Z", "9999-12-30T23:59:59.999999Z"} {
			task := b.enqueue(t, fmt.Sprintf(`{"type":"report.build","run_at":%q}`, at))
			want, _ := time.Parse(time.RFC3339Nano, at)
			// PostgreSQL stores run_at relative to its own clock: allow a skew.
			if d := task.RunAt.Sub(want).Abs(); d > time.Second {
				t.Errorf("run_at %s stored as %v", at, task.RunAt)
			}
		}
		post := func(name, body string) badCall {
			return badCall{name: name, method: "POST", path: "/v1/tasks", body: body, status: 400, detail: "run_at"}
		}
		refuse(t, b, []badCall{
			post("before year 1000", `{"type":"report.build","run_at":"0999-12-31T23:59:59.999999Z"}`),
			post("year 1", `{"type":"report.build","run_at":"0001-01-01T00:00:00Z"}`),
			post("after year 9999", `{"type":"report.build","run_at":"9999-12-31T23:00:00-01:00"}`),
			{name: "in a batch", method: "POST", path: "/v1/tasks/batch", status: 400, detail: "task 1: run_at",
				body: `{"tasks":[{"type":"report.build"},{"type":"report.build","run_at":"0500-01-01T00:00:00Z"}]}`},
		})
	})
}

// TestKeyConflictDetail: the 409 for a held idempotency key is one plain
// sentence, whether the payload or the type differs.
func TestKeyConflictDetail(t *testing.T) {
	t.Parallel()
	const want = "idempotency key already used with a different payload or type"
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.call(t, "POST", "/v1/tasks", `{"type":"email.send","payload":{"v":1}}`, "Idempotency-Key", "held").ok(t, http.StatusCreated, nil)
		for _, body := range []string{
			`{"type":"email.send","payload":{"v":2}}`,
			`{"type":"report.build","payload":{"v":1}}`,
		} {
			if p := b.call(t, "POST", "/v1/tasks", body, "Idempotency-Key", "held").problem(t, http.StatusConflict, want); p.Detail != want {
				t.Errorf("%s: detail %q, want %q", body, p.Detail, want)
			}
		}
		batch := `{"tasks":[{"type":"email.send","payload":{"v":3},"idempotency_key":"held"}]}`
		if p := b.call(t, "POST", "/v1/tasks/batch", batch).problem(t, http.StatusConflict, want); p.Detail != want {
			t.Errorf("batch: detail %q, want %q", p.Detail, want)
		}
	})
}
