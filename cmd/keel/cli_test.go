package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/server"
)

// apiSetup is a real keel server in this process: SQLite in a temporary
// directory, keel.Client, server.New, httptest.
type apiSetup struct {
	url    string
	client *keel.Client
	drv    driver.Driver
}

// serverOpts configure newAPI.
type serverOpts struct {
	handlers *keel.Handlers // workers start when set
	tokens   []server.Token
}

func newAPI(t *testing.T, o serverOpts) *apiSetup {
	t.Helper()
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := keel.Config{
		Driver: drv, Types: []string{"email", "report"}, Handlers: o.handlers, Logger: log,
		PollInterval: 20 * time.Millisecond, SettingsInterval: 50 * time.Millisecond, BackoffBase: 10 * time.Millisecond,
		BackoffMax: 20 * time.Millisecond,
	}
	c, err := keel.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.New(c, server.Options{Tokens: o.tokens, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if o.handlers != nil {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c.Stop(sctx) //nolint:errcheck // reported through the log
		drv.Close()
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return &apiSetup{url: srv.URL, client: c, drv: drv}
}

// tWriter routes logs to t.Log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// keelCmd runs the CLI in this process with args, stdin in, and returns
// its stdout, stderr and error.
func keelCmd(t *testing.T, in string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(strings.NewReader(in))
	root.SetOut(&out)
	root.SetErr(&errOut)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// mustKeel runs the CLI against s and fails the test on an error.
func (s *apiSetup) keel(t *testing.T, args ...string) string {
	t.Helper()
	out, _, err := keelCmd(t, "", append(args, "--server", s.url)...)
	if err != nil {
		t.Fatalf("keel %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// keelErr runs the CLI against s and returns its error, failing the test
// if there is none.
func (s *apiSetup) keelErr(t *testing.T, args ...string) error {
	t.Helper()
	out, _, err := keelCmd(t, "", append(args, "--server", s.url)...)
	if err == nil {
		t.Fatalf("keel %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return err
}

var enqueuedRe = regexp.MustCompile(`enqueued task (\d+)`)

func enqueuedID(t *testing.T, out string) int64 {
	t.Helper()
	m := enqueuedRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no task id in %q", out)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	return id
}

func decode[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not the expected JSON (%v):\n%s", err, out)
	}
	return v
}

func TestEnqueueStatusInspect(t *testing.T) {
	s := newAPI(t, serverOpts{})
	out := s.keel(t, "enqueue", "email", `{"to":"a@example.com"}`)
	id := enqueuedID(t, out)
	// No worker process serves the test server's queues: the answer says so.
	if !strings.Contains(out, "email on queue default, pending, waits: no live worker works queue default") {
		t.Fatalf("enqueue said %q", out)
	}
	ids := strconv.FormatInt(id, 10)
	if st := s.keel(t, "status", ids); !strings.HasPrefix(st, ids+"  email  pending  attempt 0/4") {
		t.Fatalf("status: %q", st)
	}
	in := s.keel(t, "inspect", ids)
	for _, want := range []string{"task      " + ids, "state     pending", `payload   {"to":"a@example.com"}`, "arrived", "due"} {
		if !strings.Contains(in, want) {
			t.Errorf("inspect lacks %q:\n%s", want, in)
		}
	}
	task := decode[server.Task](t, s.keel(t, "inspect", ids, "--json"))
	if task.ID != id || task.State != "pending" || string(task.Payload) != `{"to":"a@example.com"}` {
		t.Fatalf("inspect --json: %+v", task)
	}
	task = decode[server.Task](t, s.keel(t, "status", ids, "--json"))
	if task.ID != id {
		t.Fatalf("status --json: %+v", task)
	}
}

// TestStatusInspectByKey: status, inspect (and cancel, retry) find a task
// by its idempotency key with --key, as the API and the dashboard do.
func TestStatusInspectByKey(t *testing.T) {
	t.Parallel()
	s := newAPI(t, serverOpts{})
	id := enqueuedID(t, s.keel(t, "enqueue", "email", `{"to":"b@example.com"}`, "--idempotency-key", "order-42"))
	s.keel(t, "enqueue", "email", `{"to":"c@example.com"}`, "--idempotency-key", "order-43")
	ids := strconv.FormatInt(id, 10)
	if st := s.keel(t, "status", "--key", "order-42"); !strings.HasPrefix(st, ids+"  email  pending  attempt 0/4") {
		t.Fatalf("status --key: %q", st)
	}
	if in := s.keel(t, "inspect", "--key", "order-42"); !strings.Contains(in, "task      "+ids) || !strings.Contains(in, `payload   {"to":"b@example.com"}`) ||
		!strings.Contains(in, "key       order-42") {
		t.Fatalf("inspect --key:\n%s", in)
	}
	if task := decode[server.Task](t, s.keel(t, "inspect", "--key", "order-42", "--json")); task.ID != id || task.IdempotencyKey != "order-42" {
		t.Fatalf("inspect --key --json: %+v", task)
	}
	// A unique_by task shows the digest its natural key made.
	uid := strconv.FormatInt(enqueuedID(t, s.keel(t, "enqueue", "email", `{"to":"d@example.com"}`, "--unique-by", "d@example.com")), 10)
	if in := s.keel(t, "inspect", uid); !regexp.MustCompile(`(?m)^key\s+from unique_by: u:[0-9a-f]{64}$`).MatchString(in) {
		t.Fatalf("inspect of a unique_by task:\n%s", in)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--key", "order-44"}, `no task has the idempotency key "order-44"`},
		{[]string{"inspect", ids, "--key", "order-42"}, "give a task id or --key, not both"},
		{[]string{"status"}, "give a task id, or --key with the task's idempotency key"},
		{[]string{"status", "--key", ""}, "--key: the idempotency key is empty"},
	} {
		if err := s.keelErr(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("keel %s: %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

func TestEnqueueOptions(t *testing.T) {
	s := newAPI(t, serverOpts{})
	runAt := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	task := decode[server.Task](t, s.keel(t, "enqueue", "report", `{"n":1}`, "--json", "--queue", "reports", "--priority", "7",
		"--run-at", runAt.Format(time.RFC3339), "--max-attempts", "2", "--timeout", "5s", "--unique-by", "n1"))
	if task.Queue != "reports" || task.Priority != 7 || !task.RunAt.Equal(runAt) || task.MaxAttempts != 2 || time.Duration(task.Timeout) != 5*time.Second {
		t.Fatalf("options not applied: %+v", task)
	}
	out := s.keel(t, "enqueue", "report", `{"n":1}`, "--queue", "reports", "--unique-by", "n1")
	if !strings.Contains(out, fmt.Sprintf("task %d already exists (pending): nothing enqueued", task.ID)) {
		t.Fatalf("duplicate: %q", out)
	}
	delayed := decode[server.Task](t, s.keel(t, "enqueue", "report", "--json", "--delay", "2h", "--idempotency-key", "k1"))
	if d := time.Until(delayed.RunAt); d < 110*time.Minute || d > 2*time.Hour || string(delayed.Payload) != "{}" {
		t.Fatalf("--delay 2h: run_at in %v, payload %s", d, delayed.Payload)
	}
	if out := s.keel(t, "status", strconv.FormatInt(delayed.ID, 10)); !regexp.MustCompile(`^\d+  report  pending  attempt 0/4  runs in (1h59m\d+s|2h) \(at `).MatchString(out) {
		t.Fatalf("status of a delayed task: %q", out)
	}

	// A payload from stdin.
	out, _, err := keelCmd(t, `{"from":"stdin"}`, "enqueue", "email", "-", "--json", "--server", s.url)
	if err != nil || string(decode[server.Task](t, out).Payload) != `{"from":"stdin"}` {
		t.Fatalf("stdin payload: %v %s", err, out)
	}
}

func TestEnqueueErrors(t *testing.T) {
	s := newAPI(t, serverOpts{})
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"enqueue", "email", "{to:1}"}, "the payload is not valid JSON"},
		{[]string{"enqueue", "nope", "{}"}, `unknown task type "nope"`},
		{[]string{"enqueue", "email", "{}", "--delay", "soon"}, `--delay: invalid duration "soon"`},
		{[]string{"enqueue", "email", "{}", "--run-at", "tomorrow"}, "--run-at: want an RFC 3339 time"},
		{[]string{"enqueue", "email", "{}", "--max-attempts", "0"}, "(HTTP 400)"},
		{[]string{"enqueue", "email", "{}", "--delay", "1s", "--run-at", "2030-01-01T00:00:00Z"}, "none of the others can be"},
		{[]string{"status", "999"}, "task 999 not found (HTTP 404)"},
		{[]string{"status", "x"}, `task id must be a positive integer, got "x"`},
		{[]string{"inspect", "999"}, "not found (HTTP 404)"},
	}
	for _, tc := range cases {
		if err := s.keelErr(t, tc.args...); !strings.Contains(err.Error(), tc.want) {
			t.Errorf("keel %s: error %q does not contain %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	// The server is unreachable: the error says where it looked.
	_, _, err := keelCmd(t, "", "status", "1", "--server", "http://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "cannot reach the keel server at http://127.0.0.1:1") {
		t.Fatalf("unreachable server: %v", err)
	}
	if _, _, err := keelCmd(t, "", "stats", "--server", "ftp://x"); err == nil || !strings.Contains(err.Error(), "--server must be an http(s) URL") {
		t.Fatalf("bad --server: %v", err)
	}
}

func TestListCancelRetry(t *testing.T) {
	s := newAPI(t, serverOpts{})
	var ids []int64
	for i := range 5 {
		typ := "email"
		if i%2 == 1 {
			typ = "report"
		}
		ids = append(ids, enqueuedID(t, s.keel(t, "enqueue", typ, fmt.Sprintf(`{"i":%d}`, i))))
	}
	out := s.keel(t, "list")
	if strings.Count(out, "\n") != 6 || !strings.HasPrefix(out, "ID  ") || !strings.Contains(out, "report") {
		t.Fatalf("list:\n%s", out)
	}
	if first := strings.Fields(strings.Split(out, "\n")[1])[0]; first != strconv.FormatInt(ids[4], 10) {
		t.Fatalf("list is not newest first:\n%s", out)
	}
	out = s.keel(t, "list", "--type", "report")
	if strings.Count(out, "report") != 2 || strings.Contains(out, "email") {
		t.Fatalf("list --type report:\n%s", out)
	}
	out = s.keel(t, "list", "--type", "report,email", "--exclude-type", "rep*")
	if strings.Count(out, "email") != 3 || strings.Contains(out, "report") {
		t.Fatalf("list --type report,email --exclude-type 'rep*':\n%s", out)
	}
	if out := s.keel(t, "list", "--exclude-type", "keel.*", "--exclude-queue", "keel"); strings.Count(out, "\n") != 6 {
		t.Fatalf("list without keel's own tasks:\n%s", out)
	}
	if err := s.keelErr(t, "list", "--exclude-type", "email,bad name"); !strings.Contains(err.Error(), `invalid excluded type "bad name"`) ||
		!strings.Contains(err.Error(), "(HTTP 400)") {
		t.Fatalf("list --exclude-type with a bad name: %v", err)
	}
	out = s.keel(t, "list", "--limit", "2")
	if strings.Count(out, "\n") != 4 || !strings.Contains(out, "more tasks match") {
		t.Fatalf("list --limit 2:\n%s", out)
	}
	l := decode[server.TaskList](t, s.keel(t, "list", "--json", "--all", "--since", "1h"))
	if len(l.Tasks) != 5 {
		t.Fatalf("list --all --json: %d tasks", len(l.Tasks))
	}
	if l := decode[server.TaskList](t, s.keel(t, "list", "--json", "--since", "2030-01-01T00:00:00Z")); len(l.Tasks) != 0 {
		t.Fatalf("--since in the future: %d tasks", len(l.Tasks))
	}

	id := strconv.FormatInt(ids[0], 10)
	if out := s.keel(t, "cancel", id); !strings.Contains(out, "task "+id+" cancelled: cancelled finished ") {
		t.Fatalf("cancel: %q", out)
	}
	if err := s.keelErr(t, "cancel", id); !strings.Contains(err.Error(), "(HTTP 409)") {
		t.Fatalf("cancel twice: %v", err)
	}
	if out := s.keel(t, "list", "--state", "cancelled"); strings.Count(out, "\n") != 2 {
		t.Fatalf("list --state cancelled:\n%s", out)
	}
	if out := s.keel(t, "retry", id); !strings.Contains(out, "task "+id+" requeued: pending waits: no live worker works queue default") {
		t.Fatalf("retry: %q", out)
	}
	if err := s.keelErr(t, "retry", id); !strings.Contains(err.Error(), "(HTTP 409)") {
		t.Fatalf("retry of a pending task: %v", err)
	}
	if err := s.keelErr(t, "list", "--state", "bogus"); err.Error() != `--state must be one of pending, running, succeeded, dead, cancelled; got "bogus"` {
		t.Fatalf("bad state: %v", err)
	}
}

func TestQueueTypeStats(t *testing.T) {
	s := newAPI(t, serverOpts{})
	s.keel(t, "enqueue", "email", "{}", "--queue", "mail")
	out := s.keel(t, "queue", "list")
	if !regexp.MustCompile(`(?m)^mail\s+1\s+0\s+0\s+0\s+0\s+no\s+-$`).MatchString(out) {
		t.Fatalf("queue list:\n%s", out)
	}
	if out := s.keel(t, "queue", "pause", "mail"); out != "queue mail: paused yes, concurrency no cap\n" {
		t.Fatalf("queue pause: %q", out)
	}
	if out := s.keel(t, "queue", "set", "mail", "--concurrency", "3"); out != "queue mail: paused yes, concurrency 3 cluster-wide\n" {
		t.Fatalf("queue set: %q", out)
	}
	if out := s.keel(t, "queue", "resume", "mail"); out != "queue mail: paused no, concurrency 3 cluster-wide\n" {
		t.Fatalf("queue resume: %q", out)
	}
	if err := s.keelErr(t, "queue", "set", "mail"); !strings.Contains(err.Error(), "give --concurrency") {
		t.Fatalf("queue set without a value: %v", err)
	}
	if err := s.keelErr(t, "queue", "set", "mail", "--concurrency", "-1"); !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("bad concurrency: %v", err)
	}
	ql := decode[server.QueueList](t, s.keel(t, "queue", "list", "--json"))
	if len(ql.Queues) == 0 {
		t.Fatal("queue list --json: no queues")
	}

	if out := s.keel(t, "type", "pause", "email"); !strings.HasPrefix(out, "type email: paused yes") {
		t.Fatalf("type pause: %q", out)
	}
	out = s.keel(t, "type", "set", "email", "--timeout", "2m", "--max-attempts", "6", "--backoff-base", "1s", "--backoff-max", "1m")
	if out != "type email: paused yes, concurrency no cap, timeout 2m, max attempts 6, backoff 1s..1m\n" {
		t.Fatalf("type set: %q", out)
	}
	out = s.keel(t, "type", "set", "email", "--concurrency", "2")
	if out != "type email: paused yes, concurrency 2 cluster-wide, timeout 2m, max attempts 6, backoff 1s..1m\n" {
		t.Fatalf("type set --concurrency: %q", out)
	}
	out = s.keel(t, "type", "set", "email", "--timeout", "0")
	if !strings.Contains(out, "timeout -,") {
		t.Fatalf("type set --timeout 0: %q", out)
	}
	s.keel(t, "type", "resume", "email")
	out = s.keel(t, "type", "list")
	if !regexp.MustCompile(`(?m)^email\s+1\s+0\s+0\s+0\s+0\s+no\s+2\s+-\s+-\s+6\s+1s\.\.1m\s+closed\s+-$`).MatchString(out) {
		t.Fatalf("type list:\n%s", out)
	}
	if out := s.keel(t, "type", "set", "email", "--concurrency", "0", "--rate", "50", "--burst", "5"); !strings.Contains(out, "concurrency no cap,") {
		t.Fatalf("type set --concurrency 0: %q", out)
	}
	out = s.keel(t, "type", "list")
	if !regexp.MustCompile(`(?m)^email\s+1\s+0\s+0\s+0\s+0\s+no\s+-\s+50 \(burst 5\)\s+-\s+6\s+1s\.\.1m\s+closed\s+-$`).MatchString(out) {
		t.Fatalf("type list after clearing the cap:\n%s", out)
	}
	if err := s.keelErr(t, "type", "set", "email", "--concurrency", "10001"); !strings.Contains(err.Error(), "HTTP 400") ||
		!strings.Contains(err.Error(), "concurrency must be in 0..10000") {
		t.Fatalf("type set bad concurrency: %v", err)
	}
	if err := s.keelErr(t, "type", "set", "email"); !strings.Contains(err.Error(), "nothing to set") {
		t.Fatalf("type set without values: %v", err)
	}
	if err := s.keelErr(t, "type", "set", "email", "--timeout", "forever"); !strings.Contains(err.Error(), "--timeout: invalid duration") {
		t.Fatalf("type set bad timeout: %v", err)
	}
	if tl := decode[server.TypeList](t, s.keel(t, "type", "list", "--json")); len(tl.Types) < 2 {
		t.Fatalf("type list --json: %+v", tl)
	}

	// The task is ready for less than a minute: OLDEST READY says <1m, never
	// "-" while a task waits.
	out = s.keel(t, "stats")
	if !regexp.MustCompile(`(?m)^all\s+1\s+0\s+0\s+0\s*$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^mail\s+\*\s+1\s+0\s+0\s+0\s+0\.00\s+0\.00\s+0\.00\s+<1m\s+-\s+0\s+no live worker$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\s+email\s+1\s+0\s+0\s+0\s+0\.00`).MatchString(out) || strings.Contains(out, "ALERT") ||
		!strings.Contains(out, "\nkeel's own work (queue keel, in no figure above): 0 ready, 0 running, 0 waiting, 0 dead (0 in 1h); alert deliveries failing 0, given up 0") ||
		regexp.MustCompile(`(?m)^keel\s+\*`).MatchString(out) {
		t.Fatalf("stats:\n%s", out)
	}
	if st := decode[server.Stats](t, s.keel(t, "stats", "--json")); st.Counts["pending"] != 1 {
		t.Fatalf("stats --json: %+v", st)
	}
}

func TestTokens(t *testing.T) {
	s := newAPI(t, serverOpts{tokens: []server.Token{
		{Value: "admin-token-0123456789", Role: server.RoleAdmin}, {Value: "read-token-0123456789", Role: server.RoleRead},
	}})
	if err := s.keelErr(t, "stats", "--token", ""); !strings.Contains(err.Error(), "bearer token") || !strings.Contains(err.Error(), "HTTP 401") {
		t.Fatalf("no token: %v", err)
	}
	s.keel(t, "enqueue", "email", "{}", "--token", "admin-token-0123456789")
	if err := s.keelErr(t, "enqueue", "email", "{}", "--token", "read-token-0123456789"); !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("read token enqueues: %v", err)
	}
	t.Setenv("KEEL_TOKEN", "read-token-0123456789")
	if out := s.keel(t, "stats"); !strings.Contains(out, "all") {
		t.Fatalf("KEEL_TOKEN not used: %s", out)
	}
}

// TestAPIErrorWithoutProblem: a proxy's HTML error is still reported.
func TestAPIErrorWithoutProblem(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>upstream down</html>") //nolint:errcheck
	}))
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	_, _, err := keelCmd(t, "", "stats", "--server", srv.URL)
	if err == nil || err.Error() != "502 Bad Gateway: <html>upstream down</html> (HTTP 502)" {
		t.Fatalf("error: %v", err)
	}
}

// TestNodes: keel nodes lists the registered worker processes.
func TestNodes(t *testing.T) {
	t.Parallel()
	idle := newAPI(t, serverOpts{})
	if out := idle.keel(t, "nodes"); !strings.Contains(out, "no worker nodes registered") {
		t.Fatalf("nodes without workers:\n%s", out)
	}
	h := keel.NewHandlers()
	keel.Handle(h, "email", func(ctx context.Context, task *keel.Task[json.RawMessage]) error { return nil })
	s := newAPI(t, serverOpts{handlers: h})
	node := s.client.Node()
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out = s.keel(t, "nodes"); strings.Contains(out, node) {
			break
		}
	}
	if !strings.Contains(out, node) || !strings.Contains(out, "NODE") || !strings.Contains(out, "default") {
		t.Fatalf("nodes with a worker %s:\n%s", node, out)
	}
	list := decode[server.NodeList](t, s.keel(t, "nodes", "--json"))
	if len(list.Nodes) != 1 || list.Nodes[0].Name != node || list.Nodes[0].PID != os.Getpid() || list.Nodes[0].Lost ||
		list.Nodes[0].Workers["default"] != 10 {
		t.Fatalf("nodes --json: %+v", list)
	}
	// A node killed a minute ago (its row stays until the leader prunes it)
	// is listed as lost, the live one as alive with its workers.
	then := time.Now().Add(-time.Minute)
	if err := s.drv.RegisterNode(context.Background(), driver.NodeParams{Name: "gone", Host: "h", PID: 7,
		Queues: []string{"default"}, StartedAt: then, Now: then, Workers: map[string]int{"default": 3}}); err != nil {
		t.Fatal(err)
	}
	out = s.keel(t, "nodes")
	if !regexp.MustCompile(`(?m)^gone\s+LOST\s+h\s+7\s+default\(3\)`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(node)+`\s+alive\s+.*default\(10\)`).MatchString(out) {
		t.Fatalf("nodes with a lost one:\n%s", out)
	}
}

// TestConcurrencyAboveWorkers: a queue or type concurrency above the
// workers this node runs is stored, and the answer says it caps nothing
// here: on stderr, and in the API's "warnings".
func TestConcurrencyAboveWorkers(t *testing.T) {
	t.Parallel()
	s := newAPI(t, serverOpts{handlers: failing()}) // works queue default with 10 workers
	node := s.client.Node()
	for _, c := range []struct {
		args []string
		warn string // "" for none
	}{
		{[]string{"queue", "set", "default", "--concurrency", "10"}, ""},
		{[]string{"queue", "set", "default", "--concurrency", "11"},
			"warning: concurrency 11 is above the 10 workers node " + node + " runs for queue default: there it caps nothing\n"},
		{[]string{"queue", "set", "other", "--concurrency", "50"}, ""}, // a queue this node does not work
		{[]string{"queue", "pause", "default"}, ""},
		{[]string{"type", "set", "email", "--concurrency", "10"}, ""},
		{[]string{"type", "set", "email", "--concurrency", "50"},
			"warning: concurrency 50 is above the 10 workers node " + node + " runs in all its queues: there it caps nothing\n"},
		{[]string{"type", "set", "email", "--timeout", "1m"}, ""},
	} {
		out, errOut, err := keelCmd(t, "", append(c.args, "--server", s.url)...)
		if err != nil || errOut != c.warn || !strings.HasPrefix(out, c.args[0]+" ") {
			t.Errorf("keel %s: %v\nstdout %q\nstderr %q, want %q", strings.Join(c.args, " "), err, out, errOut, c.warn)
		}
	}
	q := decode[server.Queue](t, s.keel(t, "queue", "set", "default", "--concurrency", "20", "--json"))
	if q.Concurrency != 20 || len(q.Warnings) != 1 || !strings.HasPrefix(q.Warnings[0], "concurrency 20 is above the 10 workers") {
		t.Fatalf("queue set --json: %+v", q)
	}
	ty := decode[server.TaskType](t, s.keel(t, "type", "set", "email", "--concurrency", "20", "--json"))
	if ty.Concurrency != 20 || len(ty.Warnings) != 1 || !strings.HasPrefix(ty.Warnings[0], "concurrency 20 is above the 10 workers") {
		t.Fatalf("type set --json: %+v", ty)
	}
}

// TestStatsWatch: keel stats --watch prints the figures again every
// --every until its context ends; a too short --every is refused.
func TestStatsWatch(t *testing.T) {
	s := newAPI(t, serverOpts{})
	s.keel(t, "enqueue", "email", `{"to":"a@example.com"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"stats", "--watch", "--every", "200ms", "--server", s.url})
	root.SetOut(&out)
	root.SetErr(&out)
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("stats --watch: %v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "worker nodes:"); n < 3 {
		t.Fatalf("stats --watch printed %d times in 1.2s at 200ms:\n%s", n, out.String())
	}
	if err := s.keelErr(t, "stats", "--watch", "--every", "1ms"); !strings.Contains(err.Error(), "--every must be at least 100ms") {
		t.Fatalf("stats --every 1ms: %v", err)
	}
}
