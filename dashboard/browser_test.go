package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/testdb"
	"github.com/keelq/keel/server"
)

// typeSleep is the task type the browser tests drain: its handler sleeps.
const typeSleep = "browser.sleep"

// browserServer serves the API and the dashboard like keel serve does, on
// a real SQLite file, with the test tokens.
func browserServer(t *testing.T) *bundle {
	t.Helper()
	log := slog.New(slog.NewTextHandler(&testWriter{t: t}, nil))
	drv := openDriver(t, "sqlite")
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{typeMail, typeReport, typeSleep}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	api, err := server.New(c, server.Options{Tokens: testTokens, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	dash, err := New(c, Options{Tokens: testTokens, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, p := range []string{"/v1/", "/healthz", "/readyz", "/metrics"} {
		mux.Handle(p, api)
	}
	mux.Handle("/", dash)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &bundle{srv: srv, client: c, drv: drv, log: log}
}

// browser is one headless Chromium with its own profile, and what its
// console reported.
type browser struct {
	ctx  context.Context
	mu   sync.Mutex
	msgs []string // exceptions, errors and CSP reports
}

// newBrowser starts Chromium for the test with a 1280×800 window; it
// skips the test when there is no Chromium. When the test ends it fails
// the test on any JavaScript exception, console error or Content Security
// Policy report.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	testdb.Require(t, testdb.Chromium)
	path, _ := testdb.ChromiumPath()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			text := string(m.Type) + ": " + m.Text
			if m.Type == chromedp.ConsoleException || m.Type == "error" || m.Type == "assert" ||
				strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Content-Security-Policy") {
				b.mu.Lock()
				b.msgs = append(b.msgs, text)
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-done
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, m := range b.msgs {
			t.Errorf("browser console: %s", m)
		}
	})
	return b
}

// do runs steps within a time bound.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text returns the text of the element sel.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(sel, chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// eval evaluates a JavaScript expression that returns a number.
func (b *browser) eval(t *testing.T, expr string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[float64](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return n
}

// evalString evaluates a JavaScript expression that returns a string,
// trimmed.
func (b *browser) evalString(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return strings.TrimSpace(s)
}

// login logs in through the form with token and waits for the overview.
func (b *browser) login(t *testing.T, base, token string) {
	t.Helper()
	b.do(t, "log in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#login-form"),
		chromedp.SendKeys("#token", token),
		chromedp.Submit("#token"),
		chromedp.WaitVisible("#backlog"),
	)
}

// screenshotDir is where the browser tests save their screenshots: the
// test's artifact directory (go test -artifacts keeps it), or
// KEEL_SCREENSHOTS when set.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("KEEL_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

// screenshot saves the whole page as name.png.
func (b *browser) screenshot(t *testing.T, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// postForms counts the page's forms that change something: every POST
// form but the logout button.
const postForms = `document.querySelectorAll('form[method="post"]:not(#logout-form)').length`

// TestBrowserPages logs in as admin through the form, opens every page in
// headless Chromium, checks an element of each and that the console
// reported no error or CSP violation, and saves a screenshot of each (the
// overview also at phone width).
func TestBrowserPages(t *testing.T) {
	br := newBrowser(t)
	b := browserServer(t)
	s := seed(t, b, 2)
	open, members, err := b.client.EnqueueBatch(t.Context(), keel.Batch{Open: true, Tasks: []keel.TaskSpec{
		{Type: typeReport, Payload: json.RawMessage(evilPayload), Options: []keel.Option{keel.Queue("reports")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Cancel(t.Context(), members[0].ID); err != nil { // the overview's backlog stays 1
		t.Fatal(err)
	}
	dir := screenshotDir(t)
	br.login(t, b.srv.URL, adminToken)
	br.do(t, "charts", chromedp.WaitVisible("#chart-backlog canvas"))

	pages := []struct {
		name, path, sel, want string
	}{
		{"overview", "/", "#backlog", "1"},
		{"queues", "/queues", "#q-reports", "reports"},
		{"tasks", "/tasks", fmt.Sprintf("#task-%d", s.pending), typeReport},
		{"task", fmt.Sprintf("/tasks/%d", s.pending), "#task-payload", "<script>alert(1)</script>"},
		{"task-dead", fmt.Sprintf("/tasks/%d", s.dead[0]), "#task-state", "dead"},
		{"batches", "/batches", fmt.Sprintf("#batch-%d", open.ID), "1 member, more may join"},
		{"batch", fmt.Sprintf("/batches/%d", open.ID), "#batch-cancelled", "1"},
		{"task-member", fmt.Sprintf("/tasks/%d", members[0].ID), "#task-batch", fmt.Sprintf("Batch #%d", open.ID)},
		{"dead", "/dead", "#dead-group-table", evilError},
		{"alerts", "/alerts", "#alert-table", evilAlert},
		{"nodes", "/nodes", "#nav-nodes", "Nodes"},
		{"schedules", "/schedules", "#s-nightly", "Asia/Tokyo"},
		{"sequences", "/sequences", "#sequences-empty", "No sequence is held by a dead member"},
		{"sources", "/sources", fmt.Sprintf("#rejected-%d", s.rejected), evilReason},
		{"rejected", fmt.Sprintf("/rejected/%d", s.rejected), "#rejected-body", "<script>alert(1)</script>"},
	}
	for _, p := range pages {
		br.do(t, p.name, chromedp.Navigate(b.srv.URL+p.path), chromedp.WaitVisible(p.sel))
		if got := br.text(t, p.sel); !strings.Contains(got, p.want) {
			t.Errorf("%s: %s says %q, want %q in it", p.path, p.sel, got, p.want)
		}
		if n := br.eval(t, postForms); p.name == "task-dead" && n == 0 {
			t.Errorf("%s: admin sees no action", p.path)
		}
		br.screenshot(t, dir, p.name)
	}
	// Nothing overflows the 1280 px window sideways.
	for _, p := range pages {
		br.do(t, p.name, chromedp.Navigate(b.srv.URL+p.path), chromedp.WaitVisible(p.sel))
		if w := br.eval(t, `document.documentElement.scrollWidth`); w > 1280 {
			t.Errorf("%s: the page is %v px wide in a 1280 px window", p.path, w)
		}
	}
	// At phone width the page fits the screen: tables scroll inside their
	// panels, the page does not.
	br.do(t, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulatePortrait))
	for _, p := range pages {
		br.do(t, p.name, chromedp.Navigate(b.srv.URL+p.path), chromedp.WaitVisible(p.sel))
		if w := br.eval(t, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s at phone width: the page is %v px wide in a 390 px screen", p.path, w)
		}
		if p.name == "overview" || p.name == "tasks" || p.name == "dead" {
			br.screenshot(t, dir, p.name+"-phone")
		}
	}
}

// TestBrowserBacklogFalls watches the overview's backlog number fall, with
// no reload, while workers drain a queue.
func TestBrowserBacklogFalls(t *testing.T) {
	br := newBrowser(t)
	b := browserServer(t)
	ctx := t.Context()
	const n = 300
	params := make([]keel.TaskSpec, n)
	for i := range params {
		params[i] = keel.TaskSpec{Type: typeSleep, Payload: json.RawMessage(`{}`), Options: []keel.Option{keel.Queue("drain")}}
	}
	if _, err := b.client.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	br.login(t, b.srv.URL, adminToken)
	if got := br.text(t, "#backlog"); got != strconv.Itoa(n) {
		t.Fatalf("backlog %q before the drain, want %d", got, n)
	}
	// A mark a reload would wipe.
	br.eval(t, `window.keelMark = 7`)

	h := keel.NewHandlers()
	keel.Handle(h, typeSleep, func(ctx context.Context, task *keel.Task[json.RawMessage]) error {
		time.Sleep(20 * time.Millisecond)
		return nil
	})
	w, err := keel.NewClient(keel.Config{Driver: b.drv, Handlers: h, Logger: b.log, PollInterval: 20 * time.Millisecond,
		Queues: map[string]keel.QueueConfig{"drain": {MaxWorkers: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Stop(sctx) //nolint:errcheck // always nil
	}()
	seen := []string{strconv.Itoa(n)}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		// Read by script: htmx may swap the element between a query
		// and a read of its node.
		got := br.evalString(t, `(document.getElementById("backlog") || {}).textContent || ""`)
		if got != seen[len(seen)-1] {
			seen = append(seen, got)
		}
		if v, err := strconv.Atoi(strings.ReplaceAll(got, ",", "")); err == nil && v < n && len(seen) >= 3 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("backlog shown: %v", seen)
	last, err := strconv.Atoi(strings.ReplaceAll(seen[len(seen)-1], ",", ""))
	if err != nil || last >= n {
		t.Fatalf("the backlog never fell below %d on the page: %v", n, seen)
	}
	if br.eval(t, `window.keelMark || 0`) != 7 {
		t.Errorf("the page was reloaded: the backlog must update in place")
	}
}

// TestBrowserRequeue requeues dead letters through the UI, from a task's
// page and from the dead letters page, and checks the database.
func TestBrowserRequeue(t *testing.T) {
	br := newBrowser(t)
	b := browserServer(t)
	s := seed(t, b, 2)
	br.login(t, b.srv.URL, adminToken)

	// The retry button on the task's page.
	br.do(t, "retry on the task page",
		chromedp.Navigate(fmt.Sprintf("%s/tasks/%d", b.srv.URL, s.dead[0])),
		chromedp.WaitVisible("#task-retry"),
		chromedp.Click("#task-retry button"),
		chromedp.WaitVisible("#done"),
	)
	// The requeue button of the second task's row of the dead letters.
	br.do(t, "requeue on the dead letters page",
		chromedp.Navigate(b.srv.URL+"/dead"),
		chromedp.WaitVisible(fmt.Sprintf("#dead-%d", s.dead[1])),
		chromedp.Click(fmt.Sprintf(`#dead-one-%d button[value="requeue"]`, s.dead[1])),
		chromedp.WaitVisible("#done"),
	)
	if got := br.text(t, "#done"); !strings.Contains(strings.ToLower(got), "requeue") {
		t.Errorf("dead letters page after the requeue says %q", got)
	}
	for _, id := range s.dead {
		ti, err := b.client.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ti.State != keel.StatePending && ti.State != keel.StateSucceeded {
			t.Errorf("task %d is %s after the requeue, want pending", id, ti.State)
		}
	}
}

// TestBrowserReadRole: a read token's session sees every page without a
// single action button.
func TestBrowserReadRole(t *testing.T) {
	br := newBrowser(t)
	b := browserServer(t)
	s := seed(t, b, 1)
	br.login(t, b.srv.URL, readToken)
	if got := br.text(t, "#role"); got != "read" {
		t.Errorf("role shown %q, want read", got)
	}
	for _, p := range []string{"/", "/queues", "/tasks", fmt.Sprintf("/tasks/%d", s.pending), fmt.Sprintf("/tasks/%d", s.dead[0]), "/dead", "/alerts", "/nodes"} {
		br.do(t, p, chromedp.Navigate(b.srv.URL+p), chromedp.WaitVisible("#nav"))
		if n := br.eval(t, postForms); n != 0 {
			t.Errorf("%s as read: %v action forms", p, n)
		}
	}
}
