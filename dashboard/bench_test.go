package dashboard

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/testdb"
)

// BenchmarkPagesBigTable times every dashboard page, rendered through the
// handler (server time, no network), with KEEL_BENCH_ROWS tasks in the
// table (default 5,000,000). It runs only with KEEL_BENCH_DASHBOARD=1:
// filling the table takes minutes. The rows are written by one INSERT …
// SELECT like server.BenchmarkStatsBigTable's: a quarter pending, an
// eighth dead, an eighth cancelled, the rest succeeded, in four queues and
// ten types, plus a rare type and a rare queue (one row in 100,000) for
// the filters that must not walk the whole table. The table is filled
// once per database and process, so -count repeats only the pages:
//
//	KEEL_BENCH_DASHBOARD=1 go test ./dashboard -run '^$' -bench 'PagesBigTable/postgres' -benchtime 20x -count 5 -timeout 60m
func BenchmarkPagesBigTable(b *testing.B) {
	if os.Getenv("KEEL_BENCH_DASHBOARD") == "" {
		b.Skip("set KEEL_BENCH_DASHBOARD=1 to fill a big table and time every page (takes minutes)")
	}
	rows := 5_000_000
	if v := os.Getenv("KEEL_BENCH_ROWS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("KEEL_BENCH_ROWS=%q: want a positive number", v)
		}
		rows = n
	}
	for _, db := range []string{"postgres", "sqlite"} {
		b.Run(db, func(b *testing.B) {
			bt := bigTable(b, db, rows)
			pages := []string{
				"/", "/live", "/history.json?range=hour", "/history.json?range=day", "/history.json?range=week",
				"/queues", "/tasks", "/tasks?state=pending", "/tasks?state=running", "/tasks?state=dead", "/tasks?state=cancelled",
				"/tasks?type=rare", "/tasks?type=t3", "/tasks?queue=qrare", "/tasks?queue=q1", "/tasks?state=dead&type=rare",
				"/tasks?state=succeeded&queue=qrare", "/tasks?type=rare&queue=qrare",
				fmt.Sprintf("/tasks?cursor=%d", rows/2), fmt.Sprintf("/tasks/%d", rows/2), fmt.Sprintf("/tasks/%d", rows/2+2),
				"/dead", "/dead?type=rare", "/dead?queue=qrare", "/alerts", "/nodes",
			}
			for _, p := range pages {
				b.Run(p, func(b *testing.B) {
					get := func() {
						req := httptest.NewRequestWithContext(context.Background(), "GET", p, nil)
						req.Header.Set("Authorization", "Bearer "+adminToken)
						w := httptest.NewRecorder()
						bt.h.ServeHTTP(w, req)
						if w.Code != http.StatusOK {
							b.Fatalf("GET %s: status %d: %.500s", p, w.Code, w.Body.String())
						}
					}
					get() // warm the connections and the cache
					for b.Loop() {
						get()
					}
				})
			}
		})
	}
}

// bigTableDB is a filled database kept for the whole process.
type bigTableDB struct {
	h http.Handler
}

var (
	bigTablesMu sync.Mutex
	bigTables   = map[string]*bigTableDB{}
	// afterAll runs when every test and benchmark has finished (TestMain):
	// it drops the big tables.
	afterAll []func()
)

// bigTable returns the dashboard over a database of kind db filled with
// rows tasks, filling it on first use in this process.
func bigTable(b *testing.B, db string, rows int) *bigTableDB {
	b.Helper()
	bigTablesMu.Lock()
	defer bigTablesMu.Unlock()
	if bt := bigTables[db]; bt != nil {
		return bt
	}
	ctx := context.Background()
	var (
		drv   driver.Driver
		raw   *sql.DB
		table string
	)
	switch db {
	case "sqlite":
		dir, err := os.MkdirTemp("", "keel-dash-bench-")
		if err != nil {
			b.Fatal(err)
		}
		d, err := sqlite.Open(ctx, filepath.Join(dir, "bench.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		afterAll = append(afterAll, func() { d.Close(); os.RemoveAll(dir) })
		drv, raw, table = d, d.DB(), "keel_tasks"
	case "postgres":
		schema := fmt.Sprintf("keel_dash_bench_%d", os.Getpid())
		d, err := postgres.Open(ctx, testdb.PostgresDSN(), postgres.Options{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		afterAll = append(afterAll, func() {
			if _, err := d.DB().Exec(`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`); err != nil {
				fmt.Fprintf(os.Stderr, "drop schema %s: %v\n", schema, err)
			}
			d.Close()
		})
		drv, raw, table = d, d.DB(), `"`+schema+`".keel_tasks`
	default:
		b.Fatalf("unknown database %q", db)
	}
	start := time.Now()
	if _, err := raw.ExecContext(ctx, bigFillSQL(db, table), rows); err != nil {
		b.Fatalf("fill %d rows: %v", rows, err)
	}
	filled := time.Since(start)
	analyze := "ANALYZE"
	if db == "postgres" {
		analyze = "VACUUM ANALYZE " + table
	}
	if _, err := raw.ExecContext(ctx, analyze); err != nil {
		b.Fatal(err)
	}
	if _, err := drv.Reconcile(ctx, driver.ReconcileParams{}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := drv.FireAlert(ctx, driver.FireAlertParams{Rule: "dead_per_hour", Subject: "all", Message: "dead letters", Now: time.Now()}); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: %d rows written in %v, analyzed and reconciled in %v", db, rows, filled.Round(time.Second),
		(time.Since(start) - filled).Round(time.Millisecond))
	c, err := keel.NewClient(keel.Config{Driver: drv, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	h, err := New(c, Options{Tokens: testTokens, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		b.Fatal(err)
	}
	bt := &bigTableDB{h: h}
	bigTables[db] = bt
	return bt
}

// bigFillSQL inserts $1 tasks generated in SQL into table: the rows of
// server.BenchmarkStatsBigTable, with one in 100,000 of type "rare" and
// one (another) in queue "qrare".
func bigFillSQL(db, table string) string {
	const cols = `(queue, type, priority, payload, state, attempt, max_attempts, run_at, timeout_ms, payload_digest,
	created_at, updated_at, finished_at, errors)`
	if db == "sqlite" {
		return `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1)
INSERT INTO ` + table + ` ` + cols + `
SELECT CASE WHEN i % 100000 = 3 THEN 'qrare' ELSE 'q' || (i % 4) END,
	CASE WHEN i % 100000 = 7 THEN 'rare' ELSE 't' || (i % 10) END, i % 4, '{"n":' || i || '}',
	CASE i % 8 WHEN 0 THEN 'pending' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead' WHEN 3 THEN 'cancelled' ELSE 'succeeded' END,
	1, 4, (unixepoch() - i % 7200) * 1000000, 60000, 'd', (unixepoch() - 86400) * 1000000 + i, unixepoch() * 1000000,
	CASE WHEN i % 8 > 1 THEN (unixepoch() - 86400) * 1000000 + 2 * i END,
	CASE WHEN i % 8 = 2 THEN '[{"attempt":1,"error":"boom ' || (i % 3) || '","outcome":"failed"}]' ELSE '[]' END
FROM s`
	}
	return `INSERT INTO ` + table + ` ` + cols + `
SELECT CASE WHEN i % 100000 = 3 THEN 'qrare' ELSE 'q' || (i % 4) END,
	CASE WHEN i % 100000 = 7 THEN 'rare' ELSE 't' || (i % 10) END, i % 4, ('{"n":' || i || '}')::jsonb,
	CASE i % 8 WHEN 0 THEN 'pending' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead' WHEN 3 THEN 'cancelled' ELSE 'succeeded' END,
	1, 4, now() - (i % 7200) * interval '1 second', 60000, 'd', now() - interval '1 day' + i * interval '1 microsecond', now(),
	CASE WHEN i % 8 > 1 THEN now() - interval '1 day' + 2 * i * interval '1 microsecond' END,
	CASE WHEN i % 8 = 2 THEN ('[{"attempt":1,"error":"boom ' || (i % 3) || '","outcome":"failed"}]')::jsonb ELSE '[]' END
FROM generate_series(1, $1) AS i`
}
