package server

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/testdb"
)

// TestDatabaseRestartAnswers503: while enqueues flow through the API and a
// worker runs them, a private database server (this test's own) stops and
// starts again. Every answer is a success or a 503 with Retry-After: a
// server that is gone, shutting down or starting up (PostgreSQL's SQLSTATE
// 57P01 and 57P03, MariaDB's "invalid connection") is unavailable, never
// an internal error, and nothing is logged at ERROR for it. Afterwards the
// worker finishes every task long before a lease (a minute) could run
// out, and reports no outcome of its own as a lost lease.
func TestDatabaseRestartAnswers503(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"postgres", "mysql"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			srv, drv := privateDriver(t, db)
			errs := &levelCounter{Handler: testLogger(t).Handler(), errors: new(atomic.Int64), leaseLost: new(atomic.Int64)}
			log := slog.New(errs)
			c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{typeEmail}, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			h, err := New(c, Options{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(h)
			defer hs.Close()
			handlers := keel.NewHandlers()
			keel.Handle(handlers, typeEmail, func(ctx context.Context, task *keel.Task[json.RawMessage]) error { return nil })
			worker, err := keel.NewClient(keel.Config{Driver: drv, Handlers: handlers, Logger: log,
				LeaseTTL: time.Minute, PollInterval: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if err := worker.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			defer worker.Stop(context.Background()) //nolint:errcheck // the test is over

			var mu sync.Mutex
			codes := map[int]int{}
			var bad []string
			var seq atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			hc := &http.Client{Timeout: 30 * time.Second}
			for w := 0; w < 4; w++ {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						n := seq.Add(1)
						req, _ := http.NewRequest("POST", hs.URL+"/v1/tasks",
							strings.NewReader(fmt.Sprintf(`{"type":%q,"payload":{"n":%d}}`, typeEmail, n)))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Idempotency-Key", fmt.Sprintf("restart-%d", n))
						res, err := hc.Do(req)
						if err != nil {
							mu.Lock()
							bad = append(bad, err.Error())
							mu.Unlock()
							continue
						}
						var body strings.Builder
						buf := make([]byte, 512)
						k, _ := res.Body.Read(buf)
						body.Write(buf[:k])
						res.Body.Close()
						mu.Lock()
						codes[res.StatusCode]++
						switch {
						case res.StatusCode/100 == 2:
						case res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "":
						default:
							bad = append(bad, fmt.Sprintf("%d (Retry-After %q): %s", res.StatusCode, res.Header.Get("Retry-After"), body.String()))
						}
						mu.Unlock()
						if res.StatusCode == http.StatusServiceUnavailable {
							time.Sleep(10 * time.Millisecond)
						}
					}
				})
			}
			time.Sleep(700 * time.Millisecond)
			if err := srv.Stop(); err != nil {
				t.Error(err)
			}
			time.Sleep(700 * time.Millisecond)
			if err := srv.Start(); err != nil {
				t.Error(err)
			}
			mu.Lock()
			before := codes[http.StatusCreated] + codes[http.StatusOK]
			mu.Unlock()
			time.Sleep(2 * time.Second)
			close(stop)
			wg.Wait()
			t.Logf("%s: status codes %v", db, codes)
			if len(bad) > 0 {
				t.Errorf("%d answers other than 2xx or 503 with Retry-After, the first: %s", len(bad), bad[0])
			}
			if codes[http.StatusServiceUnavailable] == 0 {
				t.Error("no 503 while the server was down")
			}
			if codes[http.StatusCreated]+codes[http.StatusOK] == before {
				t.Error("no enqueue succeeded after the restart")
			}
			if n := errs.errors.Load(); n > 0 {
				t.Errorf("%d records logged at ERROR during a restart", n)
			}
			// Every task is finished well within a lease: none was left
			// running by a claim whose answer the restart cut off.
			deadline := time.Now().Add(20 * time.Second)
			for {
				left := 0
				for _, st := range []driver.State{driver.StatePending, driver.StateRunning} {
					rows, err := drv.List(t.Context(), driver.Filter{State: st, Limit: 10})
					if err != nil {
						t.Fatal(err)
					}
					left += len(rows)
				}
				if left == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("tasks still pending or running 20s after the restart (leases last a minute)")
				}
				time.Sleep(100 * time.Millisecond)
			}
			if n := errs.leaseLost.Load(); n > 0 {
				t.Errorf("%d outcomes reported as a lost lease after a restart, with no lease lost", n)
			}
		})
	}
}

// privateDriver starts a database server of the test's own and opens the
// driver db on it.
func privateDriver(t *testing.T, db string) (*testdb.Server, driver.Driver) {
	t.Helper()
	ctx := context.Background()
	switch db {
	case "postgres":
		srv := testdb.PrivatePostgres(t)
		d, err := postgres.Open(ctx, srv.DSN, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return srv, d
	case "mysql":
		srv := testdb.PrivateMariaDB(t)
		sdb, err := sql.Open("mysql", srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		if _, err := sdb.ExecContext(ctx, "CREATE DATABASE keel_restart"); err != nil {
			t.Fatal(err)
		}
		cfg, err := gomysql.ParseDSN(srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = "keel_restart"
		d, err := mysql.Open(ctx, cfg.FormatDSN(), mysql.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return srv, d
	}
	t.Fatalf("no private server for %s", db)
	return nil, nil
}

// levelCounter counts the records logged at ERROR and passes every record
// on.
type levelCounter struct {
	slog.Handler
	errors    *atomic.Int64
	leaseLost *atomic.Int64 // records saying a lease was lost
}

func (h *levelCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.errors.Add(1)
	}
	if strings.Contains(r.Message, "lease lost") {
		h.leaseLost.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h *levelCounter) WithAttrs(as []slog.Attr) slog.Handler {
	return &levelCounter{Handler: h.Handler.WithAttrs(as), errors: h.errors, leaseLost: h.leaseLost}
}

func (h *levelCounter) WithGroup(name string) slog.Handler {
	return &levelCounter{Handler: h.Handler.WithGroup(name), errors: h.errors, leaseLost: h.leaseLost}
}
