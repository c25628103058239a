package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// databases are the drivers every endpoint test runs against: sqlite and
// postgres, or those KEEL_TEST_DATABASES lists (comma-separated: sqlite,
// postgres, mysql).
var databases = func() []string {
	if v := os.Getenv("KEEL_TEST_DATABASES"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"sqlite", "postgres"}
}()

// allDatabases are the drivers the bad-input tests run against: every
// supported database, since the same input must get the same answer on
// each.
var allDatabases = []string{"sqlite", "postgres", "mysql"}

// forEachDB runs fn as a parallel subtest per database.
func forEachDB(t *testing.T, fn func(t *testing.T, db string)) {
	t.Helper()
	forDBs(t, databases, fn)
}

// forAllDBs runs fn as a parallel subtest on SQLite, PostgreSQL and
// MariaDB alike.
func forAllDBs(t *testing.T, fn func(t *testing.T, db string)) {
	t.Helper()
	forDBs(t, allDatabases, fn)
}

func forDBs(t *testing.T, dbs []string, fn func(t *testing.T, db string)) {
	t.Helper()
	for _, db := range dbs {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			fn(t, db)
		})
	}
}

// Task types the API's client knows; payloads above testPayloadLimit are
// too large for it.
const (
	typeEmail        = "email.send"
	typeReport       = "report.build"
	testPayloadLimit = 4096
)

// bundle is one test's API: a server over a fresh database.
type bundle struct {
	url    string
	client *keel.Client // the API's client
	drv    driver.Driver
	db     string
	token  string // sent by call unless a call sets Authorization
	log    *slog.Logger
	close  func() // closes the driver early (idempotent)
}

// workerElsewhere registers a worker process that serves queues "default"
// and "mail" in the node registry, as another machine would: the API
// estimates an ETA only for queues somebody works.
func (b *bundle) workerElsewhere(t *testing.T) {
	t.Helper()
	now := time.Now()
	if err := b.drv.RegisterNode(t.Context(), driver.NodeParams{
		Name: "worker-elsewhere", Host: "test", PID: 1, Queues: []string{keel.DefaultQueue, "mail"}, StartedAt: now, Now: now,
	}); err != nil {
		t.Fatal(err)
	}
}

// setup starts the API with o over a fresh database of kind db; mod
// changes the client's configuration.
func setup(t *testing.T, db string, o Options, mod ...func(*keel.Config)) *bundle {
	t.Helper()
	return setupVia(t, db, "", o, mod...)
}

// setupVia is setup with the driver connecting to the database server at
// addr (host:port) instead of the test server's own address; "" keeps it.
func setupVia(t *testing.T, db, addr string, o Options, mod ...func(*keel.Config)) *bundle {
	t.Helper()
	log := testLogger(t)
	drv, closeDrv := openDriverVia(t, db, addr)
	cfg := keel.Config{Driver: drv, Types: []string{typeEmail, typeReport}, Logger: log, MaxPayloadBytes: testPayloadLimit}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := keel.NewClient(cfg)
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
	b := &bundle{url: srv.URL, client: c, drv: drv, db: db, log: log, close: closeDrv}

	for _, tok := range o.Tokens {
		if tok.Role == RoleAdmin {
			b.token = tok.Value
		}
	}
	return b
}

// openDriver opens a fresh database: a SQLite file in the test's directory
// or a PostgreSQL schema dropped at the end.
func openDriver(t *testing.T, db string) (driver.Driver, func()) {
	t.Helper()
	return openDriverVia(t, db, "")
}

// openDriverVia is openDriver connecting through addr (see setupVia).
func openDriverVia(t *testing.T, db, addr string) (driver.Driver, func()) {
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
		// testdb drops the schema on a connection of its own: the test may
		// have closed the driver.
		schema := testdb.PostgresSchema(t, "keel_server")
		via := testdb.PostgresDSN()
		if addr != "" {
			u, err := url.Parse(via)
			if err != nil {
				t.Fatal(err)
			}
			u.Host = addr
			via = u.String()
		}
		pd, err := postgres.Open(ctx, via, postgres.Options{Schema: schema})
		if err != nil {
			t.Fatalf("open PostgreSQL schema %s via %s: %v", schema, via, err)
		}
		d = pd
	case "mysql":
		d = openMySQL(t, addr)
	default:
		t.Fatalf("unknown database %q", db)
	}
	var once sync.Once
	closeDrv := func() {
		once.Do(func() {
			if err := d.Close(); err != nil {
				t.Errorf("close %s: %v", db, err)
			}
		})
	}
	t.Cleanup(closeDrv)
	return d, closeDrv
}

// openMySQL opens a fresh MariaDB/MySQL database, dropped at the end,
// through addr unless it is "".
func openMySQL(t *testing.T, addr string) driver.Driver {
	t.Helper()
	name, dsn := testdb.MySQLDatabase(t, "keel_server")
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if addr != "" {
		cfg.Addr = addr
	}
	d, err := mysql.Open(context.Background(), cfg.FormatDSN(), mysql.Options{})
	if err != nil {
		t.Fatalf("open mysql database %s: %v", name, err)
	}
	return d
}

// testLogger sends logs to t.Log until the test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct {
	mu   sync.Mutex
	t    *testing.T
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

// result is an HTTP answer, read whole.
type result struct {
	status int
	header http.Header
	body   []byte
}

// call sends method path with body and returns the answer. hdr are header
// name, value pairs; an empty value removes the header. Content-Type
// defaults to application/json when there is a body, Authorization to the
// bundle's token.
func (b *bundle) call(t *testing.T, method, path, body string, hdr ...string) result {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: data}
}

// ok decodes a successful JSON answer with the wanted status into v.
func (r result) ok(t *testing.T, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	if v != nil {
		reflect.ValueOf(v).Elem().SetZero() // fields absent from the answer must not keep old values
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

// problem checks that the answer is a problem with status whose detail
// contains want, and returns it.
func (r result) problem(t *testing.T, status int, want string) Problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json: %s", ct, r.body)
	}
	var p Problem
	dec := json.NewDecoder(strings.NewReader(string(r.body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode problem %s: %v", r.body, err)
	}
	if p.Status != status || p.Title != http.StatusText(status) || p.Type != "about:blank" || p.Detail == "" {
		t.Fatalf("problem %+v: want status %d, its title, type about:blank and a detail", p, status)
	}
	if !strings.Contains(p.Detail, want) {
		t.Fatalf("problem detail %.300q does not contain %q", p.Detail, want)
	}
	if len(p.Detail) > 1024 {
		t.Fatalf("problem detail of %d bytes echoes the request: %.300q", len(p.Detail), p.Detail)
	}
	if strings.Contains(p.Detail, "goroutine ") || strings.Contains(p.Detail, ".go:") {
		t.Fatalf("problem detail shows Go internals: %q", p.Detail)
	}
	return p
}

// state is what the database holds: every task and every runtime setting,
// to check that a rejected request wrote nothing.
type state struct {
	tasks    []string
	settings []driver.Setting
}

func (b *bundle) state(t *testing.T) state {
	t.Helper()
	ctx := context.Background()
	rows, err := b.drv.List(ctx, driver.Filter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	var st state
	for _, r := range rows {
		st.tasks = append(st.tasks, string(r.State)+"/"+r.Type+"/"+r.Queue+"/"+r.UpdatedAt.String())
	}
	slices.Sort(st.tasks)
	if st.settings, err = b.drv.ListSettings(ctx); err != nil {
		t.Fatal(err)
	}
	return st
}

// unchanged fails the test if the database differs from before.
func (b *bundle) unchanged(t *testing.T, before state) {
	t.Helper()
	after := b.state(t)
	if !slices.Equal(before.tasks, after.tasks) {
		t.Fatalf("tasks changed:\nbefore %v\nafter  %v", before.tasks, after.tasks)
	}
	if !slices.EqualFunc(before.settings, after.settings, func(a, b driver.Setting) bool { return a == b }) {
		t.Fatalf("settings changed:\nbefore %+v\nafter  %+v", before.settings, after.settings)
	}
}

// enqueue adds a task through the API and returns it.
func (b *bundle) enqueue(t *testing.T, body string) Task {
	t.Helper()
	var task Task
	b.call(t, "POST", "/v1/tasks", body).ok(t, http.StatusCreated, &task)
	return task
}

// taskCount is how many tasks the database holds.
func (b *bundle) taskCount(t *testing.T) int {
	t.Helper()
	return len(b.state(t).tasks)
}
