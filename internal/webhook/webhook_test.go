package webhook_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/keelq/keel/internal/outcome"
	"github.com/keelq/keel/internal/webhook"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/x", true},
		{"http://localhost:8080", true},
		{"", false},
		{"ftp://example.com", false},
		{"https://", false},
		{"example.com/hook", false},
		{"http://[::1", false},
	} {
		err := webhook.Validate("ops", tc.url)
		if tc.ok != (err == nil) {
			t.Errorf("%q: %v", tc.url, err)
		}
		if err != nil && err.Error() != `webhook ops: url must be an http(s) URL, got "`+tc.url+`"` {
			t.Errorf("%q: message %q", tc.url, err)
		}
	}
}

func TestSend(t *testing.T) {
	var got *http.Request
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
	}))
	defer srv.Close()
	err := webhook.Send(t.Context(), webhook.Post{Name: "ops", URL: srv.URL, Key: "7-fired",
		Headers: map[string]string{"Authorization": "Bearer x", "User-Agent": "mine"}, Body: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "User-Agent": "mine",
		"Idempotency-Key": "7-fired", "Authorization": "Bearer x"} {
		if v := got.Header.Get(k); v != want {
			t.Errorf("header %s: %q, want %q", k, v, want)
		}
	}
	if got.Method != http.MethodPost || body["text"] != "hi" {
		t.Errorf("%s with %v", got.Method, body)
	}
}

func TestSendFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "  down for maintenance \n", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	err := webhook.Send(t.Context(), webhook.Post{Name: "ops", URL: srv.URL, Client: srv.Client()})
	want := "webhook ops: " + srv.URL + " answered 503 Service Unavailable: down for maintenance"
	var perm *outcome.Permanent
	if err == nil || err.Error() != want || errors.As(err, &perm) {
		t.Errorf("503: %v, want the retryable %q", err, want)
	}
	// A request that cannot be made is permanent.
	err = webhook.Send(t.Context(), webhook.Post{Name: "ops", URL: "http://a b"})
	if !errors.As(err, &perm) || !strings.HasPrefix(err.Error(), "permanent: webhook ops: ") {
		t.Errorf("bad URL: %v, want a permanent error", err)
	}
	// A refused connection is retried.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	err = webhook.Send(t.Context(), webhook.Post{Name: "ops", URL: closed.URL})
	if err == nil || errors.As(err, &perm) {
		t.Errorf("closed: %v, want a retryable error", err)
	}
}
