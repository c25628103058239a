package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	mysqldrv "github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/testdb"
)

// doctorLines runs keel doctor with args and returns its lines by check
// name, and the command's error.
func doctorLines(t *testing.T, args ...string) (map[string]checkResult, string, error) {
	t.Helper()
	out, err := runKeel(t, append([]string{"doctor", "--json"}, args...)...)
	var rs []checkResult
	if jerr := json.Unmarshal([]byte(out), &rs); jerr != nil {
		t.Fatalf("keel doctor --json: %v\n%s", jerr, out)
	}
	byName := map[string]checkResult{}
	for _, r := range rs {
		byName[r.Check] = r
	}
	return byName, out, err
}

// wantStatus fails unless check has status and its detail holds every
// part.
func wantStatus(t *testing.T, rs map[string]checkResult, check, status string, parts ...string) {
	t.Helper()
	r, ok := rs[check]
	if !ok || r.Status != status {
		t.Errorf("check %q: got %+v, want status %s", check, r, status)
		return
	}
	for _, p := range parts {
		if !strings.Contains(r.Detail, p) {
			t.Errorf("check %q: detail %q lacks %q", check, r.Detail, p)
		}
	}
}

// allOK fails when any check is neither ok nor n/a. The database
// connections may warn: the test servers are shared by every test running
// in parallel.
func allOK(t *testing.T, rs map[string]checkResult, out string) {
	t.Helper()
	for _, r := range rs {
		if r.Check == "database connections" && r.Status == statusWarn {
			continue
		}
		if r.Status != statusOK && r.Status != statusSkip {
			t.Errorf("not ok: %+v\n%s", r, out)
		}
	}
}

// registerNode records a node whose last heartbeat was at.
func registerNode(t *testing.T, drv driver.Driver, name string, at time.Time) {
	t.Helper()
	err := drv.RegisterNode(context.Background(), driver.NodeParams{Name: name, Host: "h", PID: 1, Queues: []string{"default"}, StartedAt: at, Now: at})
	if err != nil {
		t.Fatal(err)
	}
}

// sqliteSystem creates a migrated SQLite database with one live node and
// returns its path and the open driver.
func sqliteSystem(t *testing.T) (string, *sqlite.Driver) {
	t.Helper()
	path := testdb.SQLiteFile(t)
	drv, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	registerNode(t, drv, "alive-1", time.Now())
	return path, drv
}

// targetConfig writes a keel.toml whose type hook POSTs to url.
func targetConfig(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keel.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("[types.hook]\nurl = %q\n", url)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDoctorHealthySQLite(t *testing.T) {
	t.Parallel()
	path, drv := sqliteSystem(t)
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"hook"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(context.Background(), "hook", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	target := httptest.NewServer(http.NotFoundHandler())
	defer target.Close()
	rs, out, err := doctorLines(t, "--db", path, "--config", targetConfig(t, target.URL+"/hook"))
	if err != nil {
		t.Fatalf("healthy system: %v\n%s", err, out)
	}
	allOK(t, rs, out)
	wantStatus(t, rs, "database", statusOK, "round trip")
	wantStatus(t, rs, "migrations", statusOK, "006_alerts.sql")
	wantStatus(t, rs, "nodes", statusOK, "1 alive, 0 lost")
	wantStatus(t, rs, "oldest ready", statusOK, "1 ready, all for under a minute")
	wantStatus(t, rs, "target hook", statusOK, "connected")
	wantStatus(t, rs, "storage", statusOK, "free in", "WAL")
	wantStatus(t, rs, "database connections", statusSkip, "SQLite")
	if len(rs) != 11 {
		t.Errorf("%d checks, want 11:\n%s", len(rs), out)
	}
	// The table form: one line per check, status first.
	text, err := runKeel(t, "doctor", "--db", path)
	if err != nil || !strings.HasPrefix(text, "OK   database  ") || strings.Count(text, "\n") != 11 {
		t.Errorf("table output (%v):\n%s", err, text)
	}
}

func TestDoctorHealthyPostgres(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	drv, err := postgres.Open(context.Background(), testPostgresDSN(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	registerNode(t, drv, "alive-1", time.Now())
	rs, out, err := doctorLines(t, "--dsn", testPostgresDSN(), "--schema", schema)
	if err != nil {
		t.Fatalf("healthy system: %v\n%s", err, out)
	}
	allOK(t, rs, out)
	wantStatus(t, rs, "database", statusOK, "PostgreSQL schema "+schema)
	wantStatus(t, rs, "migrations", statusOK, "8 versions")
	wantStatus(t, rs, "clock skew", statusOK, "the database clock is")
	if c := rs["database connections"]; !strings.Contains(c.Detail, " of ") || !strings.Contains(c.Detail, "in use") {
		t.Errorf("database connections: %+v", c)
	}
	wantStatus(t, rs, "storage", statusOK, "keel_tasks", "live rows")
}

func TestDoctorDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	rs, out, err := doctorLines(t, "--dsn", "postgres://postgres@127.0.0.1:1/test?connect_timeout=2")
	if err == nil || !strings.Contains(err.Error(), "1 of 1 checks failed") {
		t.Fatalf("want a failure, got %v\n%s", err, out)
	}
	wantStatus(t, rs, "database", statusFail, "connection refused")
	// A missing SQLite file fails too, and is not created.
	path := filepath.Join(t.TempDir(), "typo.db")
	rs, out, err = doctorLines(t, "--db", path)
	if err == nil {
		t.Fatalf("missing file: no failure\n%s", out)
	}
	wantStatus(t, rs, "database", statusFail, "no SQLite database at")
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("doctor created %s: %v", path, err)
	}
}

func TestDoctorLostNode(t *testing.T) {
	t.Parallel()
	path, drv := sqliteSystem(t)
	registerNode(t, drv, "lost-1", time.Now().Add(-5*time.Minute))
	rs, out, err := doctorLines(t, "--db", path)
	if err != nil {
		t.Fatalf("a lost node beside a live one is a warning: %v\n%s", err, out)
	}
	wantStatus(t, rs, "nodes", statusWarn, "1 alive, 1 lost: lost-1 (silent 5m")
	if err := drv.RemoveNode(context.Background(), "alive-1"); err != nil {
		t.Fatal(err)
	}
	rs, out, err = doctorLines(t, "--db", path)
	if err == nil {
		t.Fatalf("no live node: no failure\n%s", out)
	}
	wantStatus(t, rs, "nodes", statusFail, "0 alive, 1 lost")
}

func TestDoctorStuckTask(t *testing.T) {
	t.Parallel()
	path, drv := sqliteSystem(t)
	ctx := context.Background()
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{"hook"}})
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Enqueue(ctx, "hook", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	claimed := time.Now()
	rows, err := drv.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 1, Owner: "alive-1", Now: claimed, LeaseExpiresAt: claimed.Add(-9 * time.Minute)})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v %v", rows, err)
	}
	rs, out, err := doctorLines(t, "--db", path)
	if err == nil {
		t.Fatalf("a task 9m past its lease: no failure\n%s", out)
	}
	wantStatus(t, rs, "stuck tasks", statusFail, fmt.Sprintf("1 running past their lease: #%d hook on alive-1 (lease expired 9m", task.ID))
}

func TestDoctorUnreachableTarget(t *testing.T) {
	t.Parallel()
	path, _ := sqliteSystem(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	rs, out, err := doctorLines(t, "--db", path, "--config", targetConfig(t, "http://"+closed+"/hook"))
	if err == nil {
		t.Fatalf("unreachable target: no failure\n%s", out)
	}
	wantStatus(t, rs, "target hook", statusFail, closed, "connection refused")
	if rs["target hook"].Hint == "" {
		t.Errorf("no hint: %+v", rs["target hook"])
	}
}

// TestDoctorPendingMigrations: a database of an older keel (only the
// first migration applied, as keel 001 left it) reports the versions it
// lacked.
func TestDoctorPendingMigrations(t *testing.T) {
	t.Parallel()
	path := testdb.SQLiteFile(t)
	first, err := os.ReadFile("../../driver/sqlite/migrations/001_create_tasks.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{string(first),
		`CREATE TABLE keel_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		fmt.Sprintf(`INSERT INTO keel_migrations VALUES (1, '001_create_tasks.sql', %d)`, time.Now().UnixMicro())} {
		if _, err := db.Exec(stmt); err != nil {
			db.Close()
			t.Fatal(err)
		}
	}
	db.Close()
	rs, out, err := doctorLines(t, "--db", path)
	if err != nil {
		t.Fatalf("pending migrations are a warning: %v\n%s", err, out)
	}
	wantStatus(t, rs, "migrations", statusWarn, "5 of 6 versions were pending", "002_nodes.sql", "006_alerts.sql")
	// Opening applied them: the next run finds them current.
	rs, _, _ = doctorLines(t, "--db", path)
	wantStatus(t, rs, "migrations", statusOK, "6 versions")
}

// TestDoctorAgainstServer asks a running keel serve.
func TestDoctorAgainstServer(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	target := httptest.NewServer(http.NotFoundHandler())
	defer target.Close()
	dir := t.TempDir()
	cfg := targetConfig(t, target.URL+"/hook")
	s := startServe(t, bin, nil, "--db", filepath.Join(dir, "keel.db"), "--listen", "127.0.0.1:0", "--config", cfg)
	// The node registers itself just after serving starts.
	var rs map[string]checkResult
	var out string
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		rs, out, err = doctorLines(t, "--server", s.addr, "--config", cfg)
		if rs["nodes"].Status != statusWarn || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("healthy server: %v\n%s", err, out)
	}
	allOK(t, rs, out)
	wantStatus(t, rs, "database", statusOK, "via "+s.addr)
	wantStatus(t, rs, "nodes", statusOK, "1 alive")
	wantStatus(t, rs, "target hook", statusOK)
	wantStatus(t, rs, "migrations", statusSkip)
	_, out, err = doctorLines(t, "--server", "http://127.0.0.1:1")
	if err == nil || !strings.Contains(out, "cannot reach the keel server") {
		t.Fatalf("no server: %v\n%s", err, out)
	}
}

// TestDoctorDeadLetterGroups: dead letters group by type and the first
// line of the last error, the largest group first; above three they warn.
func TestDoctorDeadLetterGroups(t *testing.T) {
	t.Parallel()
	ds := []deadFact{{"email", "smtp: timeout"}, {"email", "smtp: timeout"}, {"email", "smtp: timeout"}, {"report", "bad input"}}
	r := deadCheck(ds)
	want := `4 in the last hour: 3× email "smtp: timeout"; 1× report "bad input"`
	if r.Status != statusWarn || r.Detail != want || !strings.Contains(r.Hint, "keel dlq list --type email --after 1h") {
		t.Fatalf("got %+v, want warn %q", r, want)
	}
	if r := deadCheck(ds[:3]); r.Status != statusOK {
		t.Fatalf("three dead letters: %+v", r)
	}
	msg, _, _ := strings.Cut("line one\nstack", "\n")
	if got := lastError([]keel.AttemptError{{Error: "old"}, {Error: "line one\nstack"}}); got != msg {
		t.Fatalf("lastError = %q", got)
	}
}

// TestDoctorMySQL: an empty database is refused without creating tables;
// a migrated one with a live node is all ok, clock skew and table size
// included.
func TestDoctorMySQL(t *testing.T) {
	t.Parallel()
	_, _, dbURL := testMySQL(t)
	rs, out, err := doctorLines(t, "--dsn", dbURL)
	if err == nil {
		t.Fatalf("empty database: no failure\n%s", out)
	}
	wantStatus(t, rs, "database", statusFail, "no keel tables")
	cfg, err := mysqldrv.ParseDSN(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	drv, err := mysqldrv.Open(context.Background(), cfg.FormatDSN(), mysqldrv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	registerNode(t, drv, "alive-1", time.Now())
	rs, out, err = doctorLines(t, "--dsn", dbURL)
	if err != nil {
		t.Fatalf("healthy system: %v\n%s", err, out)
	}
	allOK(t, rs, out)
	wantStatus(t, rs, "clock skew", statusOK, "the database clock is")
	if c := rs["database connections"]; !strings.Contains(c.Detail, " of ") || !strings.Contains(c.Detail, "in use") {
		t.Errorf("database connections: %+v", c)
	}
	wantStatus(t, rs, "storage", statusOK, "keel_tasks", "free inside")
}
