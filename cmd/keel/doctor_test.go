package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	_, latest := migrations(t, "sqlite")
	wantStatus(t, rs, "migrations", statusOK, latest)
	wantStatus(t, rs, "nodes", statusOK, "1 alive, 0 lost")
	wantStatus(t, rs, "oldest ready", statusOK, "1 ready, all for under a minute")
	wantStatus(t, rs, "target hook", statusOK, "connected")
	wantStatus(t, rs, "storage", statusOK, "free in", "WAL")
	wantStatus(t, rs, "database connections", statusSkip, "SQLite")
	wantStatus(t, rs, "connection pool", statusSkip, "keel doctor --server")
	wantStatus(t, rs, "chaos", statusSkip, "no keel chaos run recorded")
	if len(rs) != 13 {
		t.Errorf("%d checks, want 13:\n%s", len(rs), out)
	}
	// The table form: one line per check, status first.
	text, err := runKeel(t, "doctor", "--db", path)
	if err != nil || !strings.HasPrefix(text, "OK   database  ") || strings.Count(text, "\n") != 13 {
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
	n, _ := migrations(t, "postgres")
	wantStatus(t, rs, "migrations", statusOK, fmt.Sprintf("%d versions", n))
	wantStatus(t, rs, "clock skew", statusOK, "the database clock is")
	if c := rs["database connections"]; !strings.Contains(c.Detail, " of ") || !strings.Contains(c.Detail, "in use") {
		t.Errorf("database connections: %+v", c)
	}
	wantStatus(t, rs, "nodes", statusOK, "1 alive, 0 lost")
	wantStatus(t, rs, "stuck tasks", statusOK)
	wantStatus(t, rs, "connection pool", statusSkip, "keel doctor --server")
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

// doctorSystems runs fn on a migrated SQLite file and a migrated
// PostgreSQL schema, each with one live node "alive-1"; args point keel
// doctor at it. The PostgreSQL driver takes the times the test passes
// (CallerClock), so that a test can write a heartbeat or a lease in the
// past.
func doctorSystems(t *testing.T, fn func(t *testing.T, drv driver.Driver, args []string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path, drv := sqliteSystem(t)
		fn(t, drv, []string{"--db", path})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		schema := testSchema(t)
		drv, err := postgres.Open(context.Background(), testPostgresDSN(), postgres.Options{Schema: schema, CallerClock: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { drv.Close() })
		registerNode(t, drv, "alive-1", time.Now())
		fn(t, drv, []string{"--dsn", testPostgresDSN(), "--schema", schema})
	})
}

func TestDoctorLostNode(t *testing.T) {
	t.Parallel()
	doctorSystems(t, func(t *testing.T, drv driver.Driver, args []string) {
		registerNode(t, drv, "lost-1", time.Now().Add(-5*time.Minute))
		rs, out, err := doctorLines(t, args...)
		if err != nil {
			t.Fatalf("a lost node beside a live one is a warning: %v\n%s", err, out)
		}
		wantStatus(t, rs, "nodes", statusWarn, "1 alive, 1 lost: lost-1 (silent 5m")
		if rs["nodes"].Hint == "" {
			t.Errorf("no hint: %+v", rs["nodes"])
		}
		if err := drv.RemoveNode(context.Background(), "alive-1"); err != nil {
			t.Fatal(err)
		}
		rs, out, err = doctorLines(t, args...)
		if err == nil {
			t.Fatalf("no live node: no failure\n%s", out)
		}
		wantStatus(t, rs, "nodes", statusFail, "0 alive, 1 lost")
	})
}

func TestDoctorStuckTask(t *testing.T) {
	t.Parallel()
	doctorSystems(t, func(t *testing.T, drv driver.Driver, args []string) {
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
		// A lease that expired 20s ago: the rescuer is late, not absent.
		rows, err := drv.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 1, Owner: "alive-1", Now: claimed, LeaseExpiresAt: claimed.Add(-20 * time.Second)})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v %v", rows, err)
		}
		rs, out, err := doctorLines(t, args...)
		if err != nil {
			t.Fatalf("a task 20s past its lease is a warning: %v\n%s", err, out)
		}
		wantStatus(t, rs, "stuck tasks", statusWarn, fmt.Sprintf("1 running past their lease: #%d hook on alive-1 (lease expired 2", task.ID))
		// Another, nine minutes past: nobody rescues them.
		late, err := c.Enqueue(ctx, "hook", map[string]int{"n": 2})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		rows, err = drv.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 1, Owner: "alive-1", Now: now, LeaseExpiresAt: now.Add(-9 * time.Minute)})
		if err != nil || len(rows) != 1 || rows[0].ID != late.ID {
			t.Fatalf("claim: %v %v", rows, err)
		}
		rs, out, err = doctorLines(t, args...)
		if err == nil {
			t.Fatalf("a task 9m past its lease: no failure\n%s", out)
		}
		wantStatus(t, rs, "stuck tasks", statusFail, fmt.Sprintf("2 running past their lease: #%d hook on alive-1 (lease expired 9m", late.ID),
			fmt.Sprintf("#%d hook on alive-1 (lease expired 2", task.ID))
		if rs["stuck tasks"].Hint == "" {
			t.Errorf("no hint: %+v", rs["stuck tasks"])
		}
	})
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
// lacked, on SQLite and PostgreSQL.
func TestDoctorPendingMigrations(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := testdb.SQLiteFile(t)
		first, err := os.ReadFile("../../driver/sqlite/migrations/001_create_tasks.sql")
		if err != nil {
			t.Fatal(err)
		}
		db, err := sqlite.OpenDB(path, false)
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
		n, latest := migrations(t, "sqlite")
		wantStatus(t, rs, "migrations", statusWarn, fmt.Sprintf("%d of %d versions were pending", n-1, n), "002_nodes.sql", latest)
		// Opening applied them: the next run finds them current.
		rs, _, _ = doctorLines(t, "--db", path)
		wantStatus(t, rs, "migrations", statusOK, fmt.Sprintf("%d versions", n))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		schema := testSchema(t)
		first, err := os.ReadFile("../../driver/postgres/migrations/001_create_tasks.sql")
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, testPostgresDSN())
		if err != nil {
			t.Fatal(err)
		}
		q := pgx.Identifier{schema}.Sanitize()
		for _, stmt := range []string{`CREATE SCHEMA IF NOT EXISTS ` + q, strings.ReplaceAll(string(first), "{schema}", q),
			`CREATE TABLE ` + q + `.keel_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
			`INSERT INTO ` + q + `.keel_migrations (version, name) VALUES (1, '001_create_tasks.sql')`} {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				conn.Close(ctx)
				t.Fatal(err)
			}
		}
		conn.Close(ctx)
		args := []string{"--dsn", testPostgresDSN(), "--schema", schema}
		rs, out, err := doctorLines(t, args...)
		if err != nil {
			t.Fatalf("pending migrations are a warning: %v\n%s", err, out)
		}
		n, latest := migrations(t, "postgres")
		wantStatus(t, rs, "migrations", statusWarn, fmt.Sprintf("%d of %d versions were pending", n-1, n), "002_nodes.sql", latest)
		if rs["migrations"].Hint == "" {
			t.Errorf("no hint: %+v", rs["migrations"])
		}
		rs, _, _ = doctorLines(t, args...)
		wantStatus(t, rs, "migrations", statusOK, fmt.Sprintf("%d versions", n))
	})
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
	// SQLite's pool: the writer and 4 readers.
	wantStatus(t, rs, "connection pool", statusOK, " of 6 in use", "in the last 1s")
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

// migrations returns how many migrations the driver has and the latest
// one's file name.
func migrations(t *testing.T, drv string) (int, string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("..", "..", "driver", drv, "migrations", "*.sql"))
	if err != nil || len(names) == 0 {
		t.Fatalf("migrations of %s: %v", drv, err)
	}
	slices.Sort(names)
	return len(names), filepath.Base(names[len(names)-1])
}

// TestJudgeDeadRows: doctor's rule for the task table's dead rows on
// PostgreSQL, as docs/operations.md writes it.
func TestJudgeDeadRows(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		m    driver.MaintainReport
		want string
	}{
		{"a small table with 200 % dead rows, below the threshold", driver.MaintainReport{LiveRows: 18, DeadRows: 36, Threshold: 1000, LastVacuum: now.Add(-time.Hour)}, statusOK},
		{"below the threshold, autovacuum off", driver.MaintainReport{LiveRows: 100000, DeadRows: 1900, Threshold: 2000}, statusOK},
		{"past the threshold, autovacuum off", driver.MaintainReport{LiveRows: 100, DeadRows: 1200, Threshold: 1001, LastVacuum: now}, statusWarn},
		{"past the threshold, autovacuum on, vacuumed a minute ago", driver.MaintainReport{DeadRows: 5000, Threshold: 1000, Autovacuum: true, LastVacuum: now.Add(-time.Minute)}, statusOK},
		{"past the threshold, autovacuum on, no vacuum for 5 minutes", driver.MaintainReport{DeadRows: 5000, Threshold: 1000, Autovacuum: true, LastVacuum: now.Add(-5 * time.Minute)}, statusWarn},
		{"past the threshold, autovacuum on, never vacuumed", driver.MaintainReport{DeadRows: 5000, Threshold: 1000, Autovacuum: true}, statusWarn},
		{"past the threshold, autovacuum off, a vacuum running", driver.MaintainReport{DeadRows: 5000, Threshold: 1000, Vacuuming: true}, statusOK},
	} {
		status, hint := judgeDeadRows(c.m, now, "keel")
		if status != c.want || (status == statusWarn) != strings.Contains(hint, "VACUUM (ANALYZE) keel.keel_tasks") {
			t.Errorf("%s: %s %q, want %s", c.name, status, hint, c.want)
		}
	}
}

// TestDoctorDeadRowsPostgres: dead rows past the vacuum threshold of a
// task table whose autovacuum is off make the storage check warn.
func TestDoctorDeadRowsPostgres(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	ctx := context.Background()
	drv, err := postgres.Open(ctx, testPostgresDSN(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	db := drv.DB()
	table := schema + ".keel_tasks"
	if _, err := db.ExecContext(ctx, `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	// 1,500 tasks, each updated twice: 3,000 dead rows, past 1,000 + 1 %.
	if _, err := db.ExecContext(ctx, `INSERT INTO `+table+` (queue, type, payload, state, max_attempts, run_at, timeout_ms,
		payload_digest, created_at, updated_at)
		SELECT 'default', 'doctor.dead', '{}', 'pending', 4, now(), 60000, '', now(), now() FROM generate_series(1, 1500)`); err != nil {
		t.Fatal(err)
	}
	for _, state := range []string{"running", "succeeded"} {
		if _, err := db.ExecContext(ctx, `UPDATE `+table+` SET state = $1, updated_at = now()`, state); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		m, err := drv.CheckMaintenance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if m.DeadRows >= 3000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the statistics never showed 3,000 dead rows: %+v", m)
		}
	}
	rs, out, _ := doctorLines(t, "--dsn", testPostgresDSN(), "--schema", schema)
	wantStatus(t, rs, "storage", statusWarn, "1500 live rows", "% of live; a vacuum is due from 1015)")
	if r := rs["storage"]; !strings.Contains(r.Hint, "autovacuum is off") {
		t.Errorf("storage hint %q lacks why\n%s", r.Hint, out)
	}
}
