package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/internal/proctest"
	"github.com/keelq/keel/server"
)

// buildKeel builds the keel binary once, into a temporary directory, and
// returns its path.
func buildKeel(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the keel binary")
	}
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "keel-test-bin-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "keel")
		if out, err := exec.Command("go", "build", "-trimpath", "-o", built.path, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// built is the keel binary, built once for every test of the package
// that runs it (TestMain removes it).
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// cleanEnv is this process's environment without KEEL_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KEEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// served is a running keel serve.
type served struct {
	cmd    *exec.Cmd
	addr   string // http://host:port
	stderr *proctest.Buffer
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// startServe runs bin serve with args and returns once it printed the
// address it listens on.
// env is added to the environment.
func startServe(t *testing.T, bin string, env []string, args ...string) *served {
	t.Helper()
	s := &served{cmd: exec.Command(bin, append([]string{"serve"}, args...)...), stderr: &proctest.Buffer{}, exited: make(chan struct{})}
	s.cmd.Env = append(cleanEnv(), env...)
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	var drained sync.WaitGroup
	drained.Add(1)
	go func() {
		defer drained.Done()
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(s.stderr, line)
			if a, ok := strings.CutPrefix(line, "keel: listening on "); ok {
				addr <- a
			}
		}
	}()
	go func() {
		drained.Wait()
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Kill() //nolint:errcheck // it may have exited
		<-s.exited
		if t.Failed() {
			t.Logf("keel serve stderr:\n%s", proctest.Tail(s.stderr.String(), 8192))
		}
	})
	select {
	case s.addr = <-addr:
	case <-s.exited:
		t.Fatalf("keel serve exited before listening (%v):\n%s", s.err, s.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("keel serve not listening after 30s:\n%s", s.stderr.String())
	}
	return s
}

// cli runs the keel binary against the server and returns its stdout.
func (s *served) cli(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--server", s.addr)...)
	cmd.Env = cleanEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("keel %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// TestServeEndToEnd is the whole path through real processes: keel serve
// with a type bound to an HTTP target, a task enqueued with the CLI, the
// target called, the task succeeded, its timeline, and a clean SIGTERM.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	type call struct {
		body, idemKey, taskID, attempt string
	}
	calls := make(chan call, 10)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls <- call{string(b), r.Header.Get("Idempotency-Key"), r.Header.Get("Keel-Task-Id"), r.Header.Get("Keel-Attempt")}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"sent": true}`) //nolint:errcheck
	}))
	defer target.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "keel.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
shutdown_timeout = "10s"
[engine]
poll_interval = "50ms"
[types.email]
url = %q
[types.report]
queue = "reports"
`, target.URL+"/send")), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, bin, nil, "--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0", "--config", cfg)
	if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+$`).MatchString(s.addr) || strings.HasSuffix(s.addr, ":0") {
		t.Fatalf("listening on %q, want the real address", s.addr)
	}
	if !strings.Contains(s.stderr.String(), "no tokens configured: listening on loopback only") {
		t.Errorf("no warning about running without tokens:\n%s", s.stderr.String())
	}

	out := s.cli(t, bin, "enqueue", "email", `{"to":"a@example.com"}`)
	m := regexp.MustCompile(`^enqueued task (\d+): email on queue default, pending`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("enqueue said %q", out)
	}
	id := m[1]
	select {
	case c := <-calls:
		if c.body != `{"to":"a@example.com"}` || c.idemKey != "keel-task-"+id || c.taskID != id || c.attempt != "1" {
			t.Fatalf("target called with %+v", c)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the target was not called within 20s")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out = s.cli(t, bin, "status", id)
		if strings.Contains(out, "succeeded") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after 20s: %q", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !regexp.MustCompile(`^` + id + `  email  succeeded  attempt 1/4  finished \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(.* ago\)\n$`).MatchString(out) {
		t.Fatalf("status: %q", out)
	}
	out = s.cli(t, bin, "inspect", id)
	for _, re := range []string{
		`(?m)^state\s+succeeded$`,
		`(?m)^payload\s+\{"to":"a@example.com"\}$`,
		`(?m)^timeline$`,
		`(?m)^  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \S+  arrived$`,
		`(?m)^  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \S+  attempt 1 on \S+: succeeded after \S+$`,
		`(?m)^result  \{"sent":true\}$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("inspect does not match %s:\n%s", re, out)
		}
	}
	var task server.Task
	if err := json.Unmarshal([]byte(s.cli(t, bin, "inspect", id, "--json")), &task); err != nil || task.State != "succeeded" || string(task.Result) != `{"sent":true}` {
		t.Fatalf("inspect --json: %v %+v", err, task)
	}
	if err := json.Unmarshal([]byte(s.cli(t, bin, "status", id, "--json")), &task); err != nil || fmt.Sprint(task.ID) != id {
		t.Fatalf("status --json: %v %+v", err, task)
	}
	var list server.TaskList
	if err := json.Unmarshal([]byte(s.cli(t, bin, "list", "--json")), &list); err != nil || len(list.Tasks) != 1 {
		t.Fatalf("list --json: %v %+v", err, list)
	}
	// An enqueue-only type is stored on its queue and not worked here.
	out = s.cli(t, bin, "enqueue", "report", `{}`)
	if !strings.Contains(out, "report on queue reports, pending") {
		t.Fatalf("enqueue-only type: %q", out)
	}
	var stats server.Stats
	if err := json.Unmarshal([]byte(s.cli(t, bin, "stats", "--json")), &stats); err != nil || stats.Counts["succeeded"] != 1 || stats.Counts["pending"] != 1 {
		t.Fatalf("stats --json: %v %+v", err, stats)
	}

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("keel serve still running 20s after SIGTERM")
	}
	if s.err != nil {
		t.Fatalf("keel serve exited with %v after SIGTERM", s.err)
	}
	if !strings.Contains(s.stderr.String(), "keel: stopped") {
		t.Errorf("no clean stop in the log:\n%s", s.stderr.String())
	}
}

// TestServeBinaryRefusesPublicWithoutTokens: keel serve on 0.0.0.0 with
// no tokens exits non-zero with the reason, and with a token it serves.
func TestServeBinaryRefusesPublicWithoutTokens(t *testing.T) {
	bin := buildKeel(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--db", filepath.Join(dir, "keel.db"), "--listen", "0.0.0.0:0", "--config", filepath.Join(dir, "none.toml"))
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("serve on 0.0.0.0 without tokens: %v\n%s", err, out)
	}
	if _, statErr := os.Stat(filepath.Join(dir, "none.toml")); !os.IsNotExist(statErr) {
		t.Fatal("test setup: none.toml exists")
	}
	if !strings.Contains(string(out), "none.toml") {
		t.Fatalf("a missing --config file is not reported:\n%s", out)
	}

	cfg := filepath.Join(dir, "keel.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd = exec.CommandContext(ctx, bin, "serve", "--db", filepath.Join(dir, "keel.db"), "--listen", "0.0.0.0:0", "--config", cfg)
	cmd.Env = cleanEnv()
	out, err = cmd.CombinedOutput()
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("serve on 0.0.0.0 without tokens: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `listen (from a flag): "0.0.0.0:0" is not a loopback address and no tokens are configured`) {
		t.Fatalf("serve on 0.0.0.0 without tokens said:\n%s", out)
	}

	// With a token it starts, and the API wants the token.
	s := startServe(t, bin, []string{"KEEL_TOKEN=e2e-token-0123456789"}, "--db", filepath.Join(dir, "keel.db"), "--listen", "0.0.0.0:0", "--config", cfg)
	port := s.addr[strings.LastIndex(s.addr, ":"):]
	resp, err := http.Get("http://127.0.0.1" + port + "/v1/stats")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/stats without a token: %s", resp.Status)
	}
	// Without any [types] the server stores tasks of any valid type.
	req, err := http.NewRequest("POST", "http://127.0.0.1"+port+"/v1/tasks", strings.NewReader(`{"type":"any.thing","payload":{"n":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer e2e-token-0123456789")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), `"type":"any.thing"`) {
		t.Fatalf("enqueue of an unconfigured type with no [types]: %s %s", resp.Status, body)
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

// TestClientConfigRetention: [retention] reaches keel.Config: both
// retentions, the archive deletion (empty: off) and the interval.
func TestClientConfigRetention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env                       []string
		succeeded, dead, del, per time.Duration
	}{
		{nil, 30 * 24 * time.Hour, 30 * 24 * time.Hour, 0, time.Minute},
		{[]string{"KEEL_RETENTION_SUCCEEDED=1m", "KEEL_RETENTION_DEAD=7d", "KEEL_RETENTION_ARCHIVE=90d", "KEEL_RETENTION_INTERVAL=5s"},
			time.Minute, 7 * 24 * time.Hour, 90 * 24 * time.Hour, 5 * time.Second},
		{[]string{"KEEL_RETENTION_ARCHIVE="}, 30 * 24 * time.Hour, 30 * 24 * time.Hour, 0, time.Minute},
	} {
		path := filepath.Join(t.TempDir(), "keel.toml")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(config.Options{Path: path, Environ: tc.env})
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		k := clientConfig(cfg, nil, nil)
		if k.RetainSucceeded != tc.succeeded || k.RetainDead != tc.dead || k.DeleteArchivedAfter != tc.del || k.ArchiveInterval != tc.per {
			t.Fatalf("%v: retain succeeded %v, dead %v, delete archived after %v, every %v; want %v, %v, %v, %v", tc.env,
				k.RetainSucceeded, k.RetainDead, k.DeleteArchivedAfter, k.ArchiveInterval, tc.succeeded, tc.dead, tc.del, tc.per)
		}
	}
}
