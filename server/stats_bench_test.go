package server

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/testdb"
)

// BenchmarkStatsBigTable times GET /v1/stats with KEEL_BENCH_ROWS tasks in
// the table (default 5,000,000): the live counters make it independent of
// the table's size. The rows are written by one INSERT … SELECT (a quarter
// pending, spread over four priorities and two hours of run times; the
// rest succeeded, dead and cancelled), then Reconcile brings the counters
// in line where the driver counts in Go. The fill takes minutes; run one
// database at a time:
//
//	go test ./server -run '^$' -bench 'StatsBigTable/sqlite' -benchtime 50x
func BenchmarkStatsBigTable(b *testing.B) {
	rows := 5_000_000
	if v := os.Getenv("KEEL_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("KEEL_BENCH_ROWS=%q: want a positive number", v)
		}
		rows = n
	}
	for _, db := range []string{"sqlite", "postgres", "mysql"} {
		b.Run(db, func(b *testing.B) {
			ctx := context.Background()
			drv, raw, table := openBenchDriver(b, db)
			start := time.Now()
			if _, err := raw.ExecContext(ctx, fillSQL(db, table), rows); err != nil {
				b.Fatalf("fill %d rows: %v", rows, err)
			}
			filled := time.Since(start)
			if _, err := drv.Reconcile(ctx, driver.ReconcileParams{}); err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: %d rows written in %v, counters reconciled in %v", db, rows, filled.Round(time.Second),
				(time.Since(start) - filled).Round(time.Millisecond))
			c, err := keel.NewClient(keel.Config{Driver: drv})
			if err != nil {
				b.Fatal(err)
			}
			h, err := New(c, Options{})
			if err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			get := func() {
				resp, err := http.Get(srv.URL + "/v1/stats")
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("GET /v1/stats: %d", resp.StatusCode)
				}
			}
			get() // warm the connections
			b.ResetTimer()
			for b.Loop() {
				get()
			}
		})
	}
}

// fillSQL inserts $1 tasks generated in SQL into table.
func fillSQL(db, table string) string {
	const cols = `(queue, type, priority, payload, state, attempt, max_attempts, run_at, timeout_ms, payload_digest,
	created_at, updated_at, finished_at, errors)`
	switch db {
	case "sqlite":
		return `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1)
INSERT INTO ` + table + ` ` + cols + `
SELECT 'q' || (i % 4), 't' || (i % 10), i % 4, '{}',
	CASE i % 8 WHEN 0 THEN 'pending' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead' WHEN 3 THEN 'cancelled' ELSE 'succeeded' END,
	1, 4, (unixepoch() - i % 7200) * 1000000, 60000, 'd', unixepoch() * 1000000, unixepoch() * 1000000,
	CASE WHEN i % 8 > 1 THEN unixepoch() * 1000000 END, '[]'
FROM s`
	case "postgres":
		return `INSERT INTO ` + table + ` ` + cols + `
SELECT 'q' || (i % 4), 't' || (i % 10), i % 4, '{}',
	CASE i % 8 WHEN 0 THEN 'pending' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead' WHEN 3 THEN 'cancelled' ELSE 'succeeded' END,
	1, 4, now() - (i % 7200) * interval '1 second', 60000, 'd', now(), now(),
	CASE WHEN i % 8 > 1 THEN now() END, '[]'
FROM generate_series(1, $1) AS i`
	default:
		return `INSERT INTO ` + table + ` ` + cols + `
SELECT CONCAT('q', i % 4), CONCAT('t', i % 10), i % 4, '{}',
	CASE i % 8 WHEN 0 THEN 'pending' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead' WHEN 3 THEN 'cancelled' ELSE 'succeeded' END,
	1, 4, UTC_TIMESTAMP(6) - INTERVAL (i % 7200) SECOND, 60000, 'd', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6),
	CASE WHEN i % 8 > 1 THEN UTC_TIMESTAMP(6) END, '[]'
FROM (SELECT a.d + 10 * b.d + 100 * c.d + 1000 * d.d + 10000 * e.d + 100000 * f.d + 1000000 * g.d + 1 AS i
	FROM (SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5
		UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) a,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5
		UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) b,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5
		UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) c,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5
		UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) d,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5
		UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) e,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5
		UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) f,
	(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5
		UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9) g) s
WHERE i <= ?`
	}
}

// openBenchDriver opens a fresh database of kind db, a plain handle on it
// for the fill and the task table's name.
func openBenchDriver(b *testing.B, db string) (driver.Driver, *sql.DB, string) {
	b.Helper()
	ctx := context.Background()
	switch db {
	case "sqlite":
		d, err := sqlite.Open(ctx, testdb.SQLiteFile(b), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		return d, d.DB(), "keel_tasks"
	case "postgres":
		schema := testdb.PostgresSchema(b, "keel_bench")
		d, err := postgres.Open(ctx, testdb.PostgresDSN(), postgres.Options{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		return d, d.DB(), `"` + schema + `".keel_tasks`
	default:
		_, dsn := testdb.MySQLDatabase(b, "keel_bench")
		d, err := mysql.Open(ctx, dsn, mysql.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		return d, d.DB(), "keel_tasks"
	}
}
