package main

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/server"
)

// TestDoctorPoolCheck: the pool's thresholds, from two readings.
func TestDoctorPoolCheck(t *testing.T) {
	t.Parallel()
	p := func(inUse, max int, waits int64, waited time.Duration) driver.PoolStats {
		return driver.PoolStats{InUse: inUse, Idle: max - inUse, Max: max, WaitCount: waits, WaitDuration: waited, MaxSetting: "the DSN parameter pool_max_conns"}
	}
	for _, c := range []struct {
		name          string
		before, after driver.PoolStats
		status, part  string
	}{
		{"idle", p(0, 10, 0, 0), p(1, 10, 0, 0), statusOK, "1 of 10 in use, 9 idle; waits for a connection: 0 in the last 1s, 0 since start (0s in all)"},
		{"old waits only", p(2, 10, 40, time.Second), p(2, 10, 40, time.Second), statusOK, "0 in the last 1s, 40 since start (1s in all)"},
		{"a short wait", p(2, 10, 40, time.Second), p(2, 10, 41, time.Second+time.Millisecond), statusOK, "1 in the last 1s (1ms)"},
		{"80 %", p(8, 10, 0, 0), p(8, 10, 0, 0), statusWarn, "8 of 10 in use"},
		{"callers wait", p(3, 10, 5, 0), p(3, 10, 9, 200*time.Millisecond), statusWarn, "4 in the last 1s (200ms)"},
		{"full, nobody waits", p(10, 10, 0, 0), p(10, 10, 0, 0), statusWarn, "10 of 10 in use, 0 idle"},
		{"full with waiters", p(10, 10, 5, 0), p(10, 10, 6, 0), statusFail, "10 of 10 in use"},
	} {
		r := poolCheck(c.before, c.after, time.Second)
		if r.Status != c.status || !strings.Contains(r.Detail, c.part) {
			t.Errorf("%s: got %+v, want %s with %q", c.name, r, c.status, c.part)
		}
		if (r.Status == statusOK) != (r.Hint == "") || r.Status != statusOK && !strings.Contains(r.Hint, "pool_max_conns") {
			t.Errorf("%s: hint %q", c.name, r.Hint)
		}
	}
}

// servePostgres serves the API in this process over a fresh PostgreSQL
// schema whose pool holds max connections, and returns its URL and pool.
func servePostgres(t *testing.T, max int) (string, *pgxpool.Pool) {
	t.Helper()
	dsn := testPostgresDSN() + "&pool_max_conns=" + strconv.Itoa(max)
	drv, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: testSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	registerNode(t, drv, "alive-1", time.Now())
	c, err := keel.NewClient(keel.Config{Driver: drv, AnyType: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.New(c, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, drv.Pool()
}

// hold acquires n of pool's connections until the test ends.
func hold(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	for range n {
		conn, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Release) // before the pool closes: cleanups run last first
	}
}

// TestDoctorPoolSaturated asks a server whose pool is 80 % held (a
// warning, the rest of the checks ok), then one whose pool is full while
// callers keep waiting: the database fails (readiness times out) and the
// pool says why.
func TestDoctorPoolSaturated(t *testing.T) {
	t.Parallel()
	t.Run("80 percent", func(t *testing.T) {
		t.Parallel()
		url, pool := servePostgres(t, 5)
		hold(t, pool, 4)
		rs, out, err := doctorLines(t, "--server", url)
		if err != nil {
			t.Fatalf("a warning fails doctor: %v\n%s", err, out)
		}
		wantStatus(t, rs, "connection pool", statusWarn, "4 of 5 in use")
		if !strings.Contains(rs["connection pool"].Hint, "pool_max_conns") {
			t.Errorf("hint: %+v", rs["connection pool"])
		}
		// Reachable with a connection to spare: not failed (a loaded
		// machine's slow round trip may make it a warning).
		if db := rs["database"]; db.Status != statusOK && !(db.Status == statusWarn && strings.Contains(db.Hint, "slow")) {
			t.Errorf("check database: %+v, want ok (or slow)", db)
		}
		wantStatus(t, rs, "nodes", statusOK, "1 alive")
	})
	t.Run("full", func(t *testing.T) {
		t.Parallel()
		url, pool := servePostgres(t, 2)
		hold(t, pool, 2)
		// Callers that wait for a connection and give up, as workers and
		// API requests do.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				actx, acancel := context.WithTimeout(ctx, 50*time.Millisecond)
				if conn, err := pool.Acquire(actx); err == nil {
					conn.Release()
				}
				acancel()
			}
		}()
		defer func() { cancel(); <-done }()
		rs, out, err := doctorLines(t, "--server", url)
		if err == nil {
			t.Fatalf("a full pool: no failure\n%s", out)
		}
		wantStatus(t, rs, "database", statusFail, "did not answer")
		if !strings.Contains(rs["database"].Hint, "pool is full") {
			t.Errorf("database hint: %+v", rs["database"])
		}
		wantStatus(t, rs, "connection pool", statusFail, "2 of 2 in use, 0 idle")
	})
}
