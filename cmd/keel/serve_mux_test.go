package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/metrics"
	"github.com/keelq/keel/server"
)

// TestServeHostCheckBeforeRedirect: keel serve's handler (the API, the
// dashboard and /metrics on one listener) answers a request to a
// non-loopback Host with 403 before anything else, an unclean path such as
// //v1//stats included (it answered 307 first), and /metrics carries
// X-Content-Type-Options: nosniff like every other answer.
func TestServeHostCheckBeforeRedirect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := keel.NewClient(keel.Config{Driver: drv, AnyType: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(metrics.Options{})
	if err != nil {
		t.Fatal(err)
	}
	api, err := server.New(c, server.Options{Logger: log, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	h, err := withDashboard(api, c, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(host, path string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest("GET", srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Path, req.Host = path, host
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, path := range []string{"//v1//stats", "/v1//tasks", "//v1/tasks/", "/v1/./stats", "/v1/../v1/stats", "//metrics", "/metrics/", "//healthz",
		"/v1", "//", "//queues", "/./dead", "/v1/stats", "/metrics"} {
		resp, body := get("evil.example", path)
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" || !strings.Contains(body, "is not a loopback name or address") {
			t.Errorf("GET %s with Host evil.example: %d, Location %q, want 403 first: %.200s", path, resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
	resp, body := get("127.0.0.1", "/metrics")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("GET /metrics: %d %.200s", resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("/metrics: X-Content-Type-Options %q, want nosniff", got)
	}
	// The metrics listener of its own ([metrics] listen) alike.
	mh, err := server.MetricsHandler(m, server.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	mh.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/metrics", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("metrics listener: %d, X-Content-Type-Options %q", rec.Code, rec.Header().Get("X-Content-Type-Options"))
	}
	// A loopback Host still reaches the API through an unclean path.
	if resp, _ := get("127.0.0.1", "//v1//stats"); resp.StatusCode/100 == 4 || resp.StatusCode/100 == 5 {
		t.Errorf("GET //v1//stats on loopback: %d", resp.StatusCode)
	}
}
