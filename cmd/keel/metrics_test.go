package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const (
	metricsAdminToken = "metrics-admin-token-0123"
	metricsReadToken  = "metrics-read-token-01234"
)

// get GETs url with token ("" for none) and returns the status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeMetrics: GET /metrics on the API needs a read (or admin) token
// and counts the API's requests and the HTTP target's; with
// [metrics] listen it is served there instead.
func TestServeMetrics(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck
	}))
	defer target.Close()
	write := func(dir, extra string) string {
		cfg := filepath.Join(dir, "keel.toml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
[engine]
poll_interval = "50ms"
[[tokens]]
token = %q
role = "read"
[types.email]
url = %q
%s`, metricsReadToken, target.URL, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	env := []string{"KEEL_TOKEN=" + metricsAdminToken}

	dir := t.TempDir()
	s := startServe(t, bin, env, "--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0", "--config", write(dir, ""))
	req, _ := http.NewRequest("POST", s.addr+"/v1/tasks", strings.NewReader(`{"type":"email","payload":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+metricsAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("enqueue: %s", resp.Status)
	}
	if code, body := get(t, s.addr+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without a token: %d %s", code, body)
	}
	want := []string{
		`keel_api_requests_total{code="201",route="POST /v1/tasks"} 1`,
		`keel_api_requests_total{code="401",route="GET /metrics"} 1`,
		`keel_tasks_enqueued_total{queue="default",type="email"} 1`,
		`keel_attempts_total{outcome="succeeded",queue="default",type="email"} 1`,
		`keel_http_target_requests_total{code="200",type="email"} 1`,
		`keel_http_target_duration_seconds_count{code="200",type="email"} 1`,
		`keel_db_connections_max 6`, // SQLite: the writer, the callers' connection and 4 readers
		`go_goroutines `,
	}
	var body string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var code int
		code, body = get(t, s.addr+"/metrics", metricsReadToken)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics with a read token: %d %s", code, body)
		}
		missing := 0
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s /metrics lacks some of %q:\n%s", want, body)
		}
	}
	if regexp.MustCompile(`route="GET /metrics/`).MatchString(body) || strings.Contains(body, `route="/`) {
		t.Errorf("a route label is a raw path:\n%s", body)
	}

	// On a listener of its own: the API answers 404, the listener serves
	// the metrics under the same token rules.
	dir = t.TempDir()
	s = startServe(t, bin, env, "--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0",
		"--config", write(dir, "[metrics]\nlisten = \"127.0.0.1:0\"\n"))
	m := regexp.MustCompile(`keel: metrics on (http://127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(s.stderr.String())
	for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m = regexp.MustCompile(`keel: metrics on (http://127\.0\.0\.1:\d+)/metrics`).FindStringSubmatch(s.stderr.String())
	}
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", s.stderr.String())
	}
	if code, body := get(t, s.addr+"/metrics", metricsReadToken); code != http.StatusNotFound {
		t.Fatalf("GET /metrics on the API with [metrics] listen: %d %s", code, body)
	}
	if code, body := get(t, m[1]+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics on its listener without a token: %d %s", code, body)
	}
	code, body := get(t, m[1]+"/metrics", metricsReadToken)
	if code != http.StatusOK || !strings.Contains(body, `keel_api_requests_total{code="404",route="GET /metrics"} 1`) {
		t.Fatalf("GET /metrics on its listener: %d\n%s", code, body)
	}
	if code, _ := get(t, m[1]+"/v1/stats", metricsReadToken); code != http.StatusNotFound {
		t.Fatalf("the metrics listener serves the API: GET /v1/stats %d", code)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}
