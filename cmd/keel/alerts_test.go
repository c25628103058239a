package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel/server"
)

// webhook is a local alert receiver: 503 while down; it records what it
// accepted by event and subject.
type webhook struct {
	*httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	got  map[string]int
}

func newWebhook(t *testing.T, auth string) *webhook {
	w := &webhook{got: map[string]int{}}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.down.Load() {
			http.Error(rw, "down", http.StatusServiceUnavailable)
			return
		}
		var b struct{ Text, Event, Subject string }
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || b.Text == "" {
			t.Errorf("webhook body: %v %+v", err, b)
		}
		if got := r.Header.Get("Authorization"); got != auth {
			t.Errorf("Authorization %q, want %q", got, auth)
		}
		w.mu.Lock()
		w.got[b.Event+" "+b.Subject]++
		w.mu.Unlock()
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *webhook) count(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got[key]
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alertsOf lists the server's alerts through the CLI's JSON.
func alertsOf(t *testing.T, bin string, s *served) []server.AlertRecord {
	var l server.AlertList
	if err := json.Unmarshal([]byte(s.cli(t, bin, "alerts", "--json")), &l); err != nil {
		t.Fatal(err)
	}
	return l.Alerts
}

// TestServeAlertDeliverySurvivesRestart: dead letters trip dead_per_hour;
// the webhook is down, so delivery is retried; keel serve is SIGKILLed
// and started again; once the webhook is up the alert arrives, once per
// alert, with its secret header read from the environment.
func TestServeAlertDeliverySurvivesRestart(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	hook := newWebhook(t, "Bearer from-env")
	hook.down.Store(true)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "mail provider down", http.StatusInternalServerError)
	}))
	defer target.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "keel.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
shutdown_timeout = "5s"
[engine]
poll_interval = "50ms"
lease_ttl = "3s"
heartbeat_interval = "1s"
rescue_interval = "500ms"
[alerts]
dead_per_hour = 3
node_lost = false
interval = "200ms"
retry_max = "300ms"
[[alerts.webhooks]]
name = "chat"
url = %q
headers_env = { Authorization = "HOOK_AUTH" }
[types.mail]
url = %q
max_attempts = 1
`, hook.URL, target.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOOK_AUTH=Bearer from-env"}
	args := []string{"--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0", "--config", cfg}
	s := startServe(t, bin, env, args...)
	for i := range 4 {
		s.cli(t, bin, "enqueue", "mail", fmt.Sprintf(`{"n":%d}`, i))
	}
	waitUntil(t, 30*time.Second, "two alerts whose webhook delivery failed twice", func() bool {
		as := alertsOf(t, bin, s)
		tried := 0
		for _, a := range as {
			for _, d := range a.Deliveries {
				if d.Notifier == "chat" && d.Attempts >= 2 && d.DeliveredAt == nil {
					tried++
				}
			}
		}
		return tried == 2
	})
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	hook.down.Store(false)
	s = startServe(t, bin, env, args...)
	waitUntil(t, 30*time.Second, "both alerts delivered after the restart", func() bool {
		return hook.count("fired type:mail") == 1 && hook.count("fired all") == 1
	})
	time.Sleep(2 * time.Second) // ten evaluations: nothing is sent twice
	if a, b := hook.count("fired type:mail"), hook.count("fired all"); a != 1 || b != 1 {
		t.Fatalf("delivered %d and %d times, want once each", a, b)
	}
	out := s.cli(t, bin, "alerts")
	for _, want := range []string{"dead_per_hour type:mail: FIRING since", "next: keel dlq list --type mail --after 1h", "fired -> chat: delivered", "fired -> log: delivered"} {
		if !strings.Contains(out, want) {
			t.Errorf("keel alerts lacks %q:\n%s", want, out)
		}
	}
	// The webhook's failed attempts fired notifier_failing too, unless no
	// evaluation saw them before the kill; it resolves once this process
	// leads (after the killed one's lease) and sees nothing failing.
	if out := s.cli(t, bin, "stats"); !regexp.MustCompile(`ALERT: (2 firing \(dead_per_hour 2\)|3 firing \(dead_per_hour 2, notifier_failing 1\)): see keel alerts --firing`).MatchString(out) {
		t.Errorf("keel stats does not show the firing alerts:\n%s", out)
	}
	// Rules changed at runtime through the CLI apply at once; a bad one
	// is refused and changes nothing.
	if out := s.cli(t, bin, "alerts", "rules", "dead_per_hour=10"); !strings.Contains(out, "more than 10 dead letters") || !strings.Contains(out, "source: runtime") {
		t.Fatalf("rules after the change:\n%s", out)
	}
	waitUntil(t, 30*time.Second, "both alerts resolved and delivered", func() bool {
		return hook.count("resolved type:mail") == 1 && hook.count("resolved all") == 1
	})
	bad := exec.Command(bin, "alerts", "rules", "failure_ratio=2", "--server", s.addr)
	bad.Env = cleanEnv()
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "failure_ratio must be in [0, 1)") {
		t.Fatalf("bad rule: %v\n%s", err, out)
	}
	if out := s.cli(t, bin, "alerts", "rules"); !strings.Contains(out, "more than 10 dead letters") {
		t.Fatalf("a refused change changed the rules:\n%s", out)
	}
}

// TestDrill: keel drill passes with a working webhook, and fails naming a
// broken one, with exit status 1.
func TestDrill(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	hook := newWebhook(t, "")
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such channel", http.StatusNotFound)
	}))
	defer broken.Close()
	dir := t.TempDir()
	write := func(extra string) string {
		cfg := filepath.Join(dir, "keel.toml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
shutdown_timeout = "5s"
[engine]
poll_interval = "50ms"
[alerts]
interval = "200ms"
retry_max = "300ms"
[[alerts.webhooks]]
name = "chat"
url = %q
%s`, hook.URL, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	db := filepath.Join(dir, "keel.db")
	s := startServe(t, bin, nil, "--db", db, "--listen", "127.0.0.1:0", "--config", write(""))
	out := s.cli(t, bin, "drill", "--timeout", "20s")
	for _, want := range []string{"4 tasks of type keel.drill", "chat      pass", "log       pass", "PASS: every notifier received the alert"} {
		if !strings.Contains(out, want) {
			t.Errorf("drill output lacks %q:\n%s", want, out)
		}
	}
	if hook.count("fired type:keel.drill") != 1 || hook.count("fired all") != 0 {
		t.Fatalf("webhook got %d drill and %d all-types alerts, want 1 and 0", hook.count("fired type:keel.drill"), hook.count("fired all"))
	}
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-s.exited

	s = startServe(t, bin, nil, "--db", db, "--listen", "127.0.0.1:0", "--config",
		write(fmt.Sprintf("[[alerts.webhooks]]\nname = \"pager\"\nurl = %q\n", broken.URL)))
	cmd := exec.Command(bin, "drill", "--timeout", "5s", "--server", s.addr)
	cmd.Env = cleanEnv()
	b, err := cmd.CombinedOutput()
	out = string(b)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("drill with a broken webhook: %v\n%s", err, out)
	}
	for _, want := range []string{"pager     FAIL", "404 Not Found", "chat      pass", "drill failed: not delivered to pager within 5s"} {
		if !strings.Contains(out, want) {
			t.Errorf("drill output lacks %q:\n%s", want, out)
		}
	}
}
