package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver/postgres"
)

// privatePostgres is a PostgreSQL server of the test's own, in a
// temporary directory, on a free port: stopping it disturbs no other
// test.
type privatePostgres struct {
	dsn    string
	pgCtl  string
	data   string
	asUser []string // runuser -u postgres --, when the test runs as root
}

// postgresBin finds a PostgreSQL program: on PATH, else in Debian's
// /usr/lib/postgresql/<version>/bin.
func postgresBin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(ms) == 0 {
		return ""
	}
	return ms[len(ms)-1]
}

// startPrivatePostgres runs initdb and pg_ctl start; the server stops
// when the test ends. It skips the test when initdb is not installed.
// PostgreSQL refuses to run as root: as root, it runs as the postgres
// user, which then owns the directory.
func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	initdb, pgCtl := postgresBin("initdb"), postgresBin("pg_ctl")
	if initdb == "" || pgCtl == "" {
		t.Skip("initdb and pg_ctl are not installed (PATH, /usr/lib/postgresql/*/bin): no private PostgreSQL to stop")
	}
	dir, err := os.MkdirTemp("", "keel-doctor-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &privatePostgres{pgCtl: pgCtl, data: filepath.Join(dir, "data")}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, PostgreSQL needs another user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		p.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p.run(t, initdb, "-D", p.data, "-U", "postgres", "-A", "trust", "--no-sync", "--no-instructions")
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", port, dir)
	p.run(t, pgCtl, "-D", p.data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "20", "start")
	t.Cleanup(func() { p.stop() })
	p.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", port)
	return p
}

func (p *privatePostgres) command(args ...string) *exec.Cmd {
	args = append(append([]string{}, p.asUser...), args...)
	return exec.Command(args[0], args[1:]...)
}

func (p *privatePostgres) run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := p.command(args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// stop stops the server at once, as a crash or a kill would leave it.
func (p *privatePostgres) stop() error {
	out, err := p.command(p.pgCtl, "-D", p.data, "-m", "immediate", "-w", "stop").CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// TestDoctorPostgresStopped: doctor on a private PostgreSQL, migrated and
// with a live node, is all ok; after the server stops, the database line
// fails, says so, and doctor exits non-zero.
func TestDoctorPostgresStopped(t *testing.T) {
	t.Parallel()
	pg := startPrivatePostgres(t)
	if out, err := runKeel(t, "migrate", "--dsn", pg.dsn); err != nil {
		t.Fatalf("keel migrate: %v\n%s", err, out)
	}
	drv, err := postgres.Open(context.Background(), pg.dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	registerNode(t, drv, "alive-1", time.Now())
	drv.Close()
	rs, out, err := doctorLines(t, "--dsn", pg.dsn)
	if err != nil {
		t.Fatalf("healthy private PostgreSQL: %v\n%s", err, out)
	}
	allOK(t, rs, out)
	wantStatus(t, rs, "database", statusOK, "PostgreSQL schema keel", "round trip")
	wantStatus(t, rs, "migrations", statusOK)
	wantStatus(t, rs, "database connections", statusOK)

	if err := pg.stop(); err != nil {
		t.Fatal(err)
	}
	rs, out, err = doctorLines(t, "--dsn", pg.dsn)
	if err == nil || !strings.Contains(err.Error(), "1 of 1 checks failed") {
		t.Fatalf("PostgreSQL stopped: want a failure, got %v\n%s", err, out)
	}
	wantStatus(t, rs, "database", statusFail, "connect to PostgreSQL", "connection refused")
	if h := rs["database"].Hint; !strings.Contains(h, "database server runs") {
		t.Errorf("database hint %q", h)
	}
	// The command's exit status: main turns the error into a non-zero one.
	text, err := runKeel(t, "doctor", "--dsn", pg.dsn)
	if err == nil || !strings.HasPrefix(text, "FAIL  database") {
		t.Errorf("table output (%v):\n%s", err, text)
	}
}
