package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/server"
)

// TestServeSchedules: keel serve runs a [[schedules]] block; keel
// schedules lists it with its next run in its zone; pause stops its
// ticks, trigger enqueues one task, resume starts the ticks again. A bad
// block stops keel serve with the field named.
func TestServeSchedules(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	var mu sync.Mutex
	bodies := map[string]int{}
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		json.NewDecoder(r.Body).Decode(&b) //nolint:errcheck // counted by its text
		mu.Lock()
		bodies[fmt.Sprint(b)]++
		mu.Unlock()
	}))
	defer target.Close()
	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, v := range bodies {
			n += v
		}
		return n
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "keel.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
shutdown_timeout = "5s"
[engine]
poll_interval = "50ms"
[[schedules]]
name = "ping"
spec = "@every 1s"
type = "ping"
payload = { hello = "world" }
[[schedules]]
name = "tokyo-morning"
spec = "30 7 * * *"
time_zone = "Asia/Tokyo"
type = "ping"
missed = "skip"
[types.ping]
url = %q
`, target.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, bin, nil, "--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0", "--config", cfg)
	waitUntil(t, 30*time.Second, "three ticks delivered", func() bool { return calls() >= 3 })

	out := s.cli(t, bin, "schedules")
	for _, want := range []string{"NAME", "ping", "@every 1s", "tokyo-morning", "30 7 * * *", "Asia/Tokyo", "07:30:00 +09:00", "skip"} {
		if !strings.Contains(out, want) {
			t.Errorf("keel schedules lacks %q:\n%s", want, out)
		}
	}
	if out := s.cli(t, bin, "schedules", "pause", "ping"); !strings.Contains(out, "schedule ping: paused") {
		t.Fatalf("pause: %s", out)
	}
	var l server.ScheduleList
	if err := json.Unmarshal([]byte(s.cli(t, bin, "schedules", "--json")), &l); err != nil || len(l.Schedules) != 2 || !l.Schedules[0].Paused {
		t.Fatalf("schedules --json: %+v %v", l, err)
	}
	// Ticks in flight at the pause may still be delivered; then none.
	var settled int
	waitUntil(t, 30*time.Second, "no delivery for 2s after the pause", func() bool {
		n := calls()
		time.Sleep(2 * time.Second)
		settled = calls()
		return settled == n
	})
	if out := s.cli(t, bin, "schedules", "trigger", "ping"); !strings.Contains(out, "schedule ping: enqueued task") {
		t.Fatalf("trigger: %s", out)
	}
	waitUntil(t, 30*time.Second, "the triggered task delivered", func() bool { return calls() == settled+1 })
	if out := s.cli(t, bin, "schedules", "resume", "ping"); !strings.Contains(out, "schedule ping: running, next run") {
		t.Fatalf("resume: %s", out)
	}
	waitUntil(t, 30*time.Second, "ticks again after the resume", func() bool { return calls() >= settled+3 })
	mu.Lock()
	for body := range bodies {
		if body != "map[hello:world]" {
			t.Errorf("a tick delivered %s, want the schedule's payload", body)
		}
	}
	mu.Unlock()

	unknown := exec.Command(bin, "schedules", "pause", "nope", "--server", s.addr)
	unknown.Env = cleanEnv()
	if out, err := unknown.CombinedOutput(); err == nil || !strings.Contains(string(out), `no schedule "nope"`) {
		t.Fatalf("pause of an unknown schedule: %v\n%s", err, out)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[[schedules]]\nname = \"x\"\nspec = \"61 * * * *\"\ntype = \"ping\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--db", filepath.Join(dir, "other.db"), "--listen", "127.0.0.1:0", "--config", bad)
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `schedules[0]: schedule "x": spec "61 * * * *"`) {
		t.Fatalf("keel serve with a bad schedule: %v\n%s", err, out)
	}
}
