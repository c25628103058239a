package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLimitsAndRamps: rates and bursts through PATCH, a ramp through its
// endpoints, and bad values refused with nothing written.
func TestLimitsAndRamps(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.enqueue(t, `{"type":"report.build","queue":"mail"}`)

		var q Queue
		b.call(t, "PATCH", "/v1/queues/mail", `{"rate":20.5,"burst":3}`).ok(t, http.StatusOK, &q)
		if q.Rate != 20.5 || q.Burst != 3 || q.Concurrency != 0 {
			t.Fatalf("queue with a rate %+v", q)
		}
		var typ TaskType
		b.call(t, "PATCH", "/v1/types/report.build", `{"concurrency":2,"rate":50}`).ok(t, http.StatusOK, &typ)
		if typ.Concurrency != 2 || typ.Rate != 50 || typ.Burst != 0 {
			t.Fatalf("type with limits %+v", typ)
		}
		b.call(t, "GET", "/v1/types/report.build/ramp", "").problem(t, http.StatusNotFound, "no ramp for task type report.build")

		var r RampInfo
		b.call(t, "PUT", "/v1/types/report.build/ramp", `{"steps":[1,2,5,10],"every":"10m","min_attempts":5}`).ok(t, http.StatusOK, &r)
		if r.Type != typeReport || r.State != "running" || r.Step != 1 || r.Concurrency != 1 || time.Duration(r.Every) != 10*time.Minute ||
			r.MaxFailureRatio != 0.2 || r.MinAttempts != 5 || r.NextAt == nil || !r.NextAt.Equal(r.StepAt.Add(10*time.Minute)) {
			t.Fatalf("started ramp %+v", r)
		}
		var l TypeList
		b.call(t, "GET", "/v1/types", "").ok(t, http.StatusOK, &l)
		var found bool
		for _, ty := range l.Types {
			if ty.Name == typeReport {
				found = ty.Concurrency == 1 && ty.Rate == 50 && ty.Ramp != nil && ty.Ramp.State == "running"
			}
		}
		if !found {
			t.Fatalf("types with a ramp %+v", l.Types)
		}
		b.call(t, "POST", "/v1/types/report.build/ramp/stop", "").ok(t, http.StatusOK, &r)
		if r.State != "stopped" || !strings.Contains(r.Reason, "operator") || r.NextAt != nil || r.Concurrency != 1 {
			t.Fatalf("stopped ramp %+v", r)
		}
		b.call(t, "GET", "/v1/types/report.build/ramp", "").ok(t, http.StatusOK, &r)
		if r.State != "stopped" {
			t.Fatalf("ramp after the stop %+v", r)
		}

		call := func(name, method, path, body string, detail string) badCall {
			return badCall{name: name, method: method, path: path, body: body, status: 400, detail: detail}
		}
		refuse(t, b, []badCall{
			call("negative rate", "PATCH", "/v1/types/report.build", `{"rate":-1}`, "rate must be a number of tasks per second in 0..1000000"),
			call("huge rate", "PATCH", "/v1/queues/mail", `{"rate":1e9}`, "rate must be a number of tasks per second in 0..1000000"),
			call("rate as a string", "PATCH", "/v1/types/report.build", `{"rate":"fast"}`, `field "rate"`),
			call("negative burst", "PATCH", "/v1/queues/mail", `{"burst":-1}`, "burst must be in 0..1000000"),
			call("falling steps", "PUT", "/v1/types/report.build/ramp", `{"steps":[2,1]}`, "ramp steps must rise"),
			call("no steps", "PUT", "/v1/types/report.build/ramp", `{"steps":[]}`, "a ramp needs 1..100 steps"),
			// The value as sent, not a stand-in.
			call("zero every", "PUT", "/v1/types/report.build/ramp", `{"steps":[1],"every":"0s"}`, `ramp every must be in 1s..168h, got "0s"`),
			call("negative every", "PUT", "/v1/types/report.build/ramp", `{"steps":[1],"every":"-1ns"}`, `ramp every must be in 1s..168h, got "-1ns"`),
			call("every 200h", "PUT", "/v1/types/report.build/ramp", `{"steps":[1],"every":"200h"}`, `ramp every must be in 1s..168h, got "200h"`),
			call("negative attempts", "PUT", "/v1/types/report.build/ramp", `{"steps":[1],"min_attempts":-1}`, "ramp min_attempts must be in 1..1000000 (0: the default 20), got -1"),
			call("ratio above 1", "PUT", "/v1/types/report.build/ramp", `{"steps":[1],"max_failure_ratio":1.5}`, "max_failure_ratio must be in 0..1"),
			call("zero attempts", "PUT", "/v1/types/report.build/ramp", `{"steps":[1],"min_attempts":0}`, "ramp min_attempts must be in 1..1000000, got 0"),
			call("unknown field", "PUT", "/v1/types/report.build/ramp", `{"steps":[1],"speed":2}`, `unknown field "speed"`),
			call("bad type", "PUT", "/v1/types/a%20b/ramp", `{"steps":[1]}`, `invalid task type "a b"`),
		})
	})
}
