package httptarget_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/keeltest"
	"github.com/keelq/keel/server/httptarget"
)

func TestReadTimeout(t *testing.T) {
	t.Parallel()
	var tg *target
	tg = newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/partial" {
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, `{"partial":`)
			w.(http.Flusher).Flush()
		}
		tg.hang(r)
	})
	c := start(t, func(h *keel.Handlers) {
		mustRegister(t, h, "silent", httptarget.Target{URL: tg.URL + "/silent", ReadTimeout: 200 * time.Millisecond}, keel.MaxAttempts(1))
		mustRegister(t, h, "partial", httptarget.Target{URL: tg.URL + "/partial", ReadTimeout: 200 * time.Millisecond}, keel.MaxAttempts(1))
	})
	for _, tc := range []struct{ typ, want string }{
		{"silent", "read timeout after 200ms: no response (POST " + tg.URL + "/silent)"},
		{"partial", "read timeout after 200ms: body incomplete (POST " + tg.URL + "/partial)"},
	} {
		done := keeltest.WaitFinished(t, c, enqueue(t, c, tc.typ, nil).ID, 0)
		if done.State != keel.StateDead || len(done.Errors) != 1 {
			t.Fatalf("%s: task %s with errors %v, want dead after one attempt", tc.typ, done.State, done.Errors)
		}
		e := done.Errors[0]
		if e.Error != tc.want || e.Outcome != "timeout" {
			t.Errorf("%s: attempt error %q (outcome %s), want %q (outcome timeout)", tc.typ, e.Error, e.Outcome, tc.want)
		}
		if took := e.End.Sub(e.Start); took < 200*time.Millisecond || took > 5*time.Second {
			t.Errorf("%s: attempt took %v, want about the 200ms read timeout", tc.typ, took)
		}
		if done.Result != nil {
			t.Errorf("%s: result %s stored for a failed attempt", tc.typ, done.Result)
		}
	}
}

func TestTaskTimeoutEndsRequest(t *testing.T) {
	t.Parallel()
	var tg *target
	tg = newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) { tg.hang(r) })
	c := start(t, func(h *keel.Handlers) {
		mustRegister(t, h, "slow", httptarget.Target{URL: tg.URL + "/slow"}, keel.MaxAttempts(1), keel.Timeout(300*time.Millisecond))
	})
	done := keeltest.WaitFinished(t, c, enqueue(t, c, "slow", nil).ID, 0)
	if done.State != keel.StateDead || len(done.Errors) != 1 {
		t.Fatalf("task %s with errors %v, want dead after one attempt", done.State, done.Errors)
	}
	e := done.Errors[0]
	if e.Outcome != "timeout" || !strings.Contains(e.Error, "POST "+tg.URL+"/slow stopped while waiting for the response") {
		t.Errorf("attempt error %q (outcome %s), want a timeout while waiting for the response", e.Error, e.Outcome)
	}
	if took := e.End.Sub(e.Start); took > 5*time.Second {
		t.Errorf("attempt took %v, want about the 300ms task timeout", took)
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	addr := freePort(t)
	want := "connect to " + addr + ": connection refused"
	c := start(t, func(h *keel.Handlers) {
		tg := httptarget.Target{URL: "http://" + addr + "/hook"}
		mustRegister(t, h, "retry", tg, keel.MaxAttempts(2), keel.Backoff(time.Hour, time.Hour))
		mustRegister(t, h, "once", tg, keel.MaxAttempts(1))
	})

	ti := waitRetrying(t, c, enqueue(t, c, "retry", nil).ID)
	if ti.State != keel.StatePending || ti.Attempt != 1 {
		t.Errorf("retry: task %s attempt %d, want pending after attempt 1", ti.State, ti.Attempt)
	}
	if got := ti.Errors[0]; got.Error != want || got.Outcome != "error" {
		t.Errorf("retry: attempt error %q (outcome %s), want %q (outcome error)", got.Error, got.Outcome, want)
	}
	if d := ti.RunAt.Sub(ti.Errors[0].End); d < 59*time.Minute {
		t.Errorf("retry: next attempt in %v, want the 1h backoff", d)
	}

	ti = keeltest.WaitFinished(t, c, enqueue(t, c, "once", nil).ID, 0)
	if ti.State != keel.StateDead || len(ti.Errors) != 1 || ti.Errors[0].Error != want {
		t.Errorf("once: task %s with errors %v, want dead with %q", ti.State, ti.Errors, want)
	}
}

// The TLS handshake is part of the connect timeout too: a listener that
// accepts but never answers stalls it. timeout_test.go has a dial that
// times out (a listener whose accept queue is full).
func TestConnectTimeoutInTLSHandshake(t *testing.T) {
	t.Parallel()
	url := "https://" + silentListener(t) + "/hook"
	c := start(t, func(h *keel.Handlers) {
		mustRegister(t, h, "tls", httptarget.Target{URL: url, ConnectTimeout: 200 * time.Millisecond}, keel.MaxAttempts(1))
	})
	done := keeltest.WaitFinished(t, c, enqueue(t, c, "tls", nil).ID, 0)
	want := "connect timeout after 200ms (POST " + url + ")"
	if done.State != keel.StateDead || len(done.Errors) != 1 || done.Errors[0].Error != want {
		t.Fatalf("task %s with errors %v, want dead with %q", done.State, done.Errors, want)
	}
	if done.Errors[0].Outcome != "timeout" {
		t.Errorf("outcome %s, want timeout", done.Errors[0].Outcome)
	}
	if took := done.Errors[0].End.Sub(done.Errors[0].Start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("attempt took %v, want about the 200ms connect timeout", took)
	}
}
