package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeDashboard: keel serve serves the dashboard at / next to the
// API, with the same tokens; [http] dashboard = false turns it off; the
// metrics listener never serves it.
func TestServeDashboard(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	const token = "dashboard-admin-token-0123"
	env := []string{"KEEL_TOKEN=" + token}
	dir := t.TempDir()
	s := startServe(t, bin, env, "--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0",
		"--config", writeConfigIn(t, dir, "[metrics]\nlisten = \"127.0.0.1:0\"\n"))

	// Without a session: the login form (after a redirect).
	code, body := get(t, s.addr+"/", "")
	if code != http.StatusOK || !strings.Contains(body, `id="login-form"`) {
		t.Fatalf("GET / without a token: %d %s", code, body)
	}
	code, body = get(t, s.addr+"/", token)
	if code != http.StatusOK || !strings.Contains(body, `id="backlog"`) {
		t.Fatalf("GET / with the token: %d %s", code, body)
	}
	// The API's routes still answer as the API.
	if code, body := get(t, s.addr+"/v1/stats", token); code != http.StatusOK || !strings.HasPrefix(body, "{") {
		t.Fatalf("GET /v1/stats: %d %s", code, body)
	}
	if code, body := get(t, s.addr+"/v1/nope", token); code != http.StatusNotFound || !strings.Contains(body, "openapi") {
		t.Fatalf("GET /v1/nope: %d %s", code, body)
	}
	if code, _ := get(t, s.addr+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("GET /healthz: %d", code)
	}
	// Not on the metrics listener.
	re := regexp.MustCompile(`keel: metrics on (http://127\.0\.0\.1:\d+)/metrics`)
	m := re.FindStringSubmatch(s.stderr.String())
	for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m = re.FindStringSubmatch(s.stderr.String())
	}
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", s.stderr.String())
	}
	if code, body := get(t, m[1]+"/", token); code != http.StatusNotFound || strings.Contains(body, "<html") {
		t.Fatalf("the metrics listener serves the dashboard: %d %s", code, body)
	}

	// Turned off.
	dir = t.TempDir()
	s = startServe(t, bin, env, "--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0",
		"--config", writeConfigIn(t, dir, "[http]\ndashboard = false\n"))
	if code, body := get(t, s.addr+"/", token); code != http.StatusNotFound || strings.Contains(body, "<html") {
		t.Fatalf("GET / with dashboard = false: %d %s", code, body)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// writeConfigIn writes body as keel.toml in dir and returns its path.
func writeConfigIn(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "keel.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
