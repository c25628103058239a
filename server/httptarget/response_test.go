package httptarget_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/keeltest"
	"github.com/keelq/keel/server/httptarget"
)

func TestSuccessSendsPayloadAndHeaders(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true, "n": 2}`)
	})
	c := start(t, func(h *keel.Handlers) {
		mustRegister(t, h, "hook.ok", httptarget.Target{URL: tg.URL + "/hook", Headers: map[string]string{"x-api-key": "k1"}},
			keel.Queue("default"), keel.Backoff(10*time.Millisecond, 10*time.Millisecond))
	})
	info := enqueue(t, c, "hook.ok", json.RawMessage(`{"z": 1, "a": {"b": [1, 2, "é"]}}`))
	done := keeltest.WaitFinished(t, c, info.ID, 0)

	if done.State != keel.StateSucceeded || done.Attempt != 2 {
		t.Fatalf("task %s after %d attempts, want succeeded after 2; errors %v", done.State, done.Attempt, done.Errors)
	}
	if got, want := string(done.Result), `{"ok":true,"n":2}`; got != want {
		t.Errorf("result %s, want %s", got, want)
	}
	if len(done.Errors) != 1 {
		t.Fatalf("errors %v, want the first attempt's", done.Errors)
	}
	if got, want := done.Errors[0].Error, "HTTP 503 from "+tg.URL+"/hook: busy"; got != want {
		t.Errorf("attempt 1 error %q, want %q", got, want)
	}

	reqs := tg.requests("/hook")
	if len(reqs) != 2 {
		t.Fatalf("target got %d requests, want 2", len(reqs))
	}
	if len(done.Payload) == 0 {
		t.Fatal("stored payload is empty")
	}
	id := strconv.FormatInt(info.ID, 10)
	for i, r := range reqs {
		if r.Method != http.MethodPost {
			t.Errorf("request %d: method %s, want POST", i+1, r.Method)
		}
		if string(r.Body) != string(done.Payload) {
			t.Errorf("request %d: body %s, want the stored payload %s", i+1, r.Body, done.Payload)
		}
		for name, want := range map[string]string{
			"Content-Type":    "application/json",
			"Keel-Task-Id":    id,
			"Keel-Attempt":    strconv.Itoa(i + 1),
			"Keel-Fence":      strconv.Itoa(i + 1),
			"Keel-Task-Type":  "hook.ok",
			"Keel-Queue":      "default",
			"Idempotency-Key": "keel-task-" + id,
			"User-Agent":      "keel",
			"X-Api-Key":       "k1",
		} {
			if got := r.Header.Values(name); len(got) != 1 || got[0] != want {
				t.Errorf("request %d: header %s = %q, want [%q]", i+1, name, got, want)
			}
		}
	}
}

func TestResultFromBody(t *testing.T) {
	t.Parallel()
	const limit = 16
	cases := []struct {
		name, body string
		stored     bool
	}{
		{"small json", `{"a":1}`, true},
		{"json at the limit", `{"k":"12345678"}`, true},
		{"json over the limit", `{"k":"123456789"}`, false},
		{"not json", "ok thanks", false},
		{"truncated json", `{"a":`, false},
		{"empty", "", false},
		{"large text", strings.Repeat("x", 1<<20), false},
	}
	if len(cases[1].body) != limit || len(cases[2].body) != limit+1 {
		t.Fatal("boundary bodies have the wrong size")
	}
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, cases[i].body)
	})
	c := start(t, func(h *keel.Handlers) {
		for i := range cases {
			mustRegister(t, h, fmt.Sprintf("r%d", i), httptarget.Target{URL: fmt.Sprintf("%s/r/%d", tg.URL, i), MaxResultBytes: limit})
		}
	})
	ids := make([]int64, len(cases))
	for i := range cases {
		ids[i] = enqueue(t, c, fmt.Sprintf("r%d", i), nil).ID
	}
	for i, tc := range cases {
		done := keeltest.WaitFinished(t, c, ids[i], 0)
		if done.State != keel.StateSucceeded || done.Attempt != 1 {
			t.Errorf("%s: task %s after %d attempts, want succeeded after 1; errors %v", tc.name, done.State, done.Attempt, done.Errors)
		}
		switch {
		case tc.stored && string(done.Result) != tc.body:
			t.Errorf("%s: result %q, want %q", tc.name, done.Result, tc.body)
		case !tc.stored && done.Result != nil:
			t.Errorf("%s: result %q, want none", tc.name, done.Result)
		}
	}
}

func TestStatusCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code    int
		state   keel.State
		outcome string
	}{
		{200, keel.StateSucceeded, ""},
		{204, keel.StateSucceeded, ""},
		{400, keel.StateDead, "permanent"},
		{401, keel.StateDead, "permanent"},
		{404, keel.StateDead, "permanent"},
		{422, keel.StateDead, "permanent"},
		{408, keel.StatePending, "error"},
		{429, keel.StatePending, "error"},
		{500, keel.StatePending, "error"},
		{502, keel.StatePending, "error"},
		{503, keel.StatePending, "error"},
		{301, keel.StateDead, "permanent"},
		{302, keel.StateDead, "permanent"},
		{307, keel.StateDead, "permanent"},
	}
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/s/"))
		if err != nil {
			w.WriteHeader(http.StatusTeapot) // a followed redirect lands here
			return
		}
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "reason %d", code)
	})
	c := start(t, func(h *keel.Handlers) {
		for _, tc := range cases {
			mustRegister(t, h, fmt.Sprintf("s%d", tc.code), httptarget.Target{URL: fmt.Sprintf("%s/s/%d", tg.URL, tc.code)},
				keel.MaxAttempts(3), keel.Backoff(time.Hour, time.Hour))
		}
	})
	ids := make([]int64, len(cases))
	for i, tc := range cases {
		ids[i] = enqueue(t, c, fmt.Sprintf("s%d", tc.code), nil).ID
	}
	for i, tc := range cases {
		var ti *keel.TaskInfo
		if tc.state == keel.StateSucceeded {
			ti = keeltest.WaitFinished(t, c, ids[i], 0)
		} else {
			ti = waitRetrying(t, c, ids[i])
		}
		if ti.State != tc.state || ti.Attempt != 1 {
			t.Errorf("HTTP %d: task %s after attempt %d, want %s after attempt 1 (errors %v)", tc.code, ti.State, ti.Attempt, tc.state, ti.Errors)
			continue
		}
		if tc.state == keel.StateSucceeded {
			if len(ti.Errors) != 0 || ti.Result != nil {
				t.Errorf("HTTP %d: errors %v, result %q; want neither", tc.code, ti.Errors, ti.Result)
			}
			continue
		}
		e := ti.Errors[0]
		want := fmt.Sprintf("HTTP %d from %s/s/%d: reason %d", tc.code, tg.URL, tc.code, tc.code)
		if tc.code >= 300 && tc.code < 400 {
			want = fmt.Sprintf(`HTTP %d from %s/s/%d (Location "/elsewhere"): redirects are not followed; bind the task type to the final URL`,
				tc.code, tg.URL, tc.code)
		}
		if tc.outcome == "permanent" {
			want = "permanent: " + want
		}
		if e.Error != want || string(e.Outcome) != tc.outcome {
			t.Errorf("HTTP %d: attempt error %q (outcome %s), want %q (outcome %s)", tc.code, e.Error, e.Outcome, want, tc.outcome)
		}
		if tc.state == keel.StatePending {
			if d := ti.RunAt.Sub(e.End); d < 59*time.Minute || d > 61*time.Minute {
				t.Errorf("HTTP %d: next attempt in %v, want the 1h backoff", tc.code, d)
			}
		}
	}
	if n := len(tg.requests("/elsewhere")); n != 0 {
		t.Errorf("a redirect was followed %d times", n)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) {
		now := time.Now().UTC()
		w.Header().Set("Date", now.Format(http.TimeFormat))
		code := http.StatusServiceUnavailable
		switch r.URL.Path {
		case "/seconds":
			code = http.StatusTooManyRequests
			w.Header().Set("Retry-After", "3")
		case "/date":
			w.Header().Set("Retry-After", now.Add(5*time.Second).Format(http.TimeFormat))
		case "/past":
			w.Header().Set("Retry-After", now.Add(-time.Hour).Format(http.TimeFormat))
		case "/invalid":
			w.Header().Set("Retry-After", "soon")
		case "/huge":
			w.Header().Set("Retry-After", "99999999999999999999")
		}
		w.WriteHeader(code)
	})
	cases := []struct {
		path   string
		status int
		delay  time.Duration
	}{
		{"/seconds", 429, 3 * time.Second},
		{"/date", 503, 5 * time.Second}, // measured from the response's Date
		{"/past", 503, time.Hour},       // ignored: the backoff
		{"/invalid", 503, time.Hour},    // ignored: the backoff
		{"/huge", 503, 24 * time.Hour},  // capped
	}
	c := start(t, func(h *keel.Handlers) {
		for _, tc := range cases {
			mustRegister(t, h, "ra"+strings.ReplaceAll(tc.path, "/", "."), httptarget.Target{URL: tg.URL + tc.path},
				keel.MaxAttempts(3), keel.Backoff(time.Hour, time.Hour))
		}
	})
	ids := make([]int64, len(cases))
	for i, tc := range cases {
		ids[i] = enqueue(t, c, "ra"+strings.ReplaceAll(tc.path, "/", "."), nil).ID
	}
	for i, tc := range cases {
		ti := waitRetrying(t, c, ids[i])
		if ti.State != keel.StatePending || ti.Attempt != 1 {
			t.Errorf("%s: task %s after attempt %d, want pending after attempt 1", tc.path, ti.State, ti.Attempt)
			continue
		}
		e := ti.Errors[0]
		if want := fmt.Sprintf("HTTP %d from %s%s", tc.status, tg.URL, tc.path); e.Error != want {
			t.Errorf("%s: attempt error %q, want %q", tc.path, e.Error, want)
		}
		if d := ti.RunAt.Sub(e.End); d < tc.delay-50*time.Millisecond || d > tc.delay+50*time.Millisecond {
			t.Errorf("%s: next attempt in %v, want %v", tc.path, d, tc.delay)
		}
	}
}

func TestMessagesHideCredentials(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != "svc" || pass != "hunter2" || r.URL.Query().Get("token") != "s3cret" {
			t.Errorf("target got auth %q/%q (%v) and query %q, want the URL's", user, pass, ok, r.URL.RawQuery)
		}
		http.Error(w, "down", http.StatusBadGateway)
	})
	url := strings.Replace(tg.URL, "http://", "http://svc:hunter2@", 1) + "/hook?token=s3cret"
	c := start(t, func(h *keel.Handlers) {
		mustRegister(t, h, "secret", httptarget.Target{URL: url}, keel.MaxAttempts(1))
	})
	done := keeltest.WaitFinished(t, c, enqueue(t, c, "secret", nil).ID, 0)
	if len(done.Errors) != 1 {
		t.Fatalf("errors %v, want one", done.Errors)
	}
	if got, want := done.Errors[0].Error, "HTTP 502 from "+tg.URL+"/hook: down"; got != want {
		t.Errorf("attempt error %q, want %q", got, want)
	}
	if n := len(tg.requests("/hook")); n != 1 {
		t.Errorf("target got %d requests, want 1", n)
	}
}
