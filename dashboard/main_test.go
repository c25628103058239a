package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/testdb"
	"github.com/keelq/keel/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(cleanAfter{m}) }

// cleanAfter runs afterAll once every test and benchmark has run.
type cleanAfter struct{ m *testing.M }

func (c cleanAfter) Run() int {
	code := c.m.Run()
	for _, f := range afterAll {
		f()
	}
	return code
}

// The test tokens, one per role.
const (
	adminToken   = "admin-token-1"
	readToken    = "read-token-1"
	enqueueToken = "enqueue-token-1"
)

var testTokens = []server.Token{
	{Value: adminToken, Role: server.RoleAdmin},
	{Value: readToken, Role: server.RoleRead},
	{Value: enqueueToken, Role: server.RoleEnqueue},
}

// The hostile strings the pages must show escaped.
const (
	evilPayload = `{"x":"<script>alert(1)</script>"}`
	evilError   = "<script>alert(2)</script> refused"
	evilStep    = "<script>alert(5)</script> step"
	evilAlert   = "<script>alert(3)</script> fired"
	evilReason  = "<script>alert(6)</script> rejected"
)

// Task types the tests use.
const (
	typeMail   = "mail.send"
	typeReport = "report.build"
)

// bundle is one test's dashboard over a fresh database.
type bundle struct {
	srv    *httptest.Server
	client *keel.Client
	drv    driver.Driver
	log    *slog.Logger
}

// databases are the databases the page tests run on: SQLite and
// PostgreSQL, or those KEEL_TEST_DATABASES lists (comma-separated:
// sqlite, postgres, mysql).
var databases = func() []string {
	if v := os.Getenv("KEEL_TEST_DATABASES"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"sqlite", "postgres"}
}()

// forEachDB runs fn as a parallel subtest on each of databases.
func forEachDB(t *testing.T, fn func(t *testing.T, db string)) {
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			fn(t, db)
		})
	}
}

func openDriver(t *testing.T, db string) driver.Driver {
	t.Helper()
	ctx := context.Background()
	var d driver.Driver
	switch db {
	case "sqlite":
		sd, err := sqlite.Open(ctx, testdb.SQLiteFile(t), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d = sd
	case "postgres":
		pd, err := postgres.Open(ctx, testdb.PostgresDSN(), postgres.Options{Schema: testdb.PostgresSchema(t, "keel_dash")})
		if err != nil {
			t.Fatal(err)
		}
		d = pd
	case "mysql":
		_, dsn := testdb.MySQLDatabase(t, "keel_dash")
		md, err := mysql.Open(ctx, dsn, mysql.Options{})
		if err != nil {
			t.Fatal(err)
		}
		d = md
	default:
		t.Fatalf("unknown database %q", db)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// setup serves a dashboard with o over a fresh database of kind db.
func setup(t *testing.T, db string, o Options) *bundle {
	t.Helper()
	log := slog.New(slog.NewTextHandler(&testWriter{t: t}, nil))
	drv := openDriver(t, db)
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{typeMail, typeReport}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	o.Logger = log
	h, err := New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &bundle{srv: srv, client: c, drv: drv, log: log}
}

// testWriter sends logs to t.Log until the test ends.
type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// seeded are the ids of the tasks seed made.
type seeded struct {
	pending  int64   // payload evilPayload
	dead     []int64 // died with evilError
	rejected int64   // a rejected message of source "orders": body evilPayload, reason evilReason
}

// seed enqueues a pending task with a hostile payload, dead-letters n
// tasks with a hostile error and fires an alert with a hostile message.
func seed(t *testing.T, b *bundle, n int) seeded {
	t.Helper()
	ctx := t.Context()
	var s seeded
	ti, err := b.client.Enqueue(ctx, typeReport, json.RawMessage(evilPayload), keel.Queue("reports"),
		keel.IdempotencyKey("<script>alert(7)</script> order-42"))
	if err != nil {
		t.Fatal(err)
	}
	s.pending = ti.ID
	if n > 0 {
		s.dead = deadLetters(t, b, n)
	}
	if _, _, err := b.drv.FireAlert(ctx, driver.FireAlertParams{Rule: "dead_per_hour", Subject: "all", Message: evilAlert, Hint: "<b>look</b>", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := b.drv.UpsertSchedules(ctx, []driver.ScheduleParams{{Name: "nightly", Spec: "0 3 * * *", TimeZone: "Asia/Tokyo",
		Type: typeReport, Queue: "reports", Payload: json.RawMessage(evilPayload), Missed: driver.MissedSkip, Now: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	s.rejected = seedSources(t, b)
	return s
}

// seedSources reports source "orders" on node-1 and stores one rejected
// message of it (type mail.send, key /order_id) with a hostile body and
// reason; it returns the message's id.
func seedSources(t *testing.T, b *bundle) int64 {
	t.Helper()
	ss, ok := b.drv.(driver.SourceStore)
	if !ok {
		t.Fatalf("driver %T is no driver.SourceStore", b.drv)
	}
	now := time.Now()
	if err := ss.ReportSource(t.Context(), driver.SourceReport{Source: "orders", Node: "node-1", Kind: "rabbitmq", Type: typeMail,
		State: "running", Accepted: 42, Duplicate: 2, Rejected: 1, AckP50: 2 * time.Millisecond, AckP99: 80 * time.Millisecond,
		StartedAt: now.Add(-time.Hour), Now: now}); err != nil {
		t.Fatal(err)
	}
	body := []byte(evilPayload)
	digest := sha256.Sum256(body)
	res, err := ss.InsertRejected(t.Context(), []driver.RejectedParams{{Source: "orders", Type: typeMail, Key: "/order_id", Reason: evilReason,
		Body: body, Size: int64(len(body)), Headers: []byte(`{"message-id":["m-1"]}`), Digest: digest[:], ReceivedAt: now}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].ID
}

// deadLetters has a worker dead-letter n new tasks of type mail.send in
// queue "default" with evilError.
func deadLetters(t *testing.T, b *bundle, n int) []int64 {
	t.Helper()
	ctx := t.Context()
	h := keel.NewHandlers()
	keel.Handle(h, typeMail, func(ctx context.Context, task *keel.Task[json.RawMessage]) error {
		if _, err := keel.Step(ctx, evilStep, func(ctx context.Context) (string, error) { return evilStep, nil }); err != nil {
			return err
		}
		return keel.Permanent(errors.New(evilError))
	})
	// Alerting off: this worker's leader would otherwise fire no_live_worker
	// for queue "reports" and deliver it as a task of queue "keel" when
	// timing allows, and pages count finished tasks.
	w, err := keel.NewClient(keel.Config{Driver: b.drv, Handlers: h, Logger: b.log, PollInterval: 20 * time.Millisecond,
		Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {}}, Alerts: keel.AlertConfig{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for range n {
		ti, err := b.client.Enqueue(ctx, typeMail, json.RawMessage(`{"to":"a@example.com"}`))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ti.ID)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Stop(sctx) //nolint:errcheck // always nil
	}()
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range ids {
		for {
			ti, err := b.client.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ti.State == keel.StateDead {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %d still %s after 20s", id, ti.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return ids
}

// response is a page's answer.
type response struct {
	status int
	header http.Header
	body   string
}

// noRedirect is an HTTP client that does not follow redirects.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends a request with token as a bearer token ("" none) and form as a
// POST body (nil: GET).
func (b *bundle) do(t *testing.T, method, path, token string, form url.Values, hdr ...string) response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b2, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b2)}
}

// login posts token to the login form and returns the session cookie.
func (b *bundle) login(t *testing.T, token string) *http.Cookie {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", b.srv.URL+"/login", strings.NewReader(url.Values{"token": {token}, "next": {"/tasks"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: status %d, want 303", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			return c
		}
	}
	t.Fatal("login set no session cookie")
	return nil
}
