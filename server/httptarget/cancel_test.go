package httptarget_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/testdb"
	"github.com/keelq/keel/server/httptarget"
)

// openDriver opens a fresh database of kind db (skipping a server that is
// not there), closed when the test ends.
func openDriver(t *testing.T, db string) driver.Driver {
	t.Helper()
	ctx := context.Background()
	var d driver.Driver
	var err error
	switch db {
	case "sqlite":
		d, err = sqlite.Open(ctx, testdb.SQLiteFile(t), sqlite.Options{Synchronous: sqlite.SyncNormal})
	case "postgres":
		testdb.Require(t, testdb.Postgres)
		d, err = postgres.Open(ctx, testdb.PostgresDSN(), postgres.Options{Schema: testdb.PostgresSchema(t, "keel_httpcancel")})
	case "mysql":
		testdb.Require(t, testdb.MySQL)
		_, dsn := testdb.MySQLDatabase(t, "keel_httpcancel")
		d, err = mysql.Open(ctx, dsn, mysql.Options{})
	}
	if err != nil {
		t.Fatalf("open %s: %v", db, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestCancelAbortsRequest: cancelling a task whose HTTP
// target is answering aborts the request (the target sees its request's
// context end) instead of letting it run its course, and the task's
// history records the attempt as cancelled. The cancel comes from this
// process ("here") or from another one that only shares the database
// ("elsewhere"), which the worker learns of at its next heartbeat; on
// every database.
func TestCancelAbortsRequest(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres", "mysql"} {
		for _, from := range []string{"here", "elsewhere"} {
			t.Run(db+"/"+from, func(t *testing.T) {
				t.Parallel()
				drv := openDriver(t, db)
				arrived := make(chan struct{}, 1)
				aborted := make(chan time.Time, 1)
				tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) {
					arrived <- struct{}{}
					select {
					case <-r.Context().Done():
						aborted <- time.Now()
					case <-time.After(20 * time.Second): // a slow target: the whole request takes 20s
						w.WriteHeader(http.StatusOK)
					}
				})
				log := slog.New(slog.NewTextHandler(t.Output(), nil))
				h := keel.NewHandlers()
				mustRegister(t, h, "slow", httptarget.Target{URL: tg.URL + "/slow", ReadTimeout: time.Minute}, keel.Timeout(time.Minute))
				worker, err := keel.NewClient(keel.Config{Driver: drv, Handlers: h, Logger: log,
					PollInterval: 10 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				if err := worker.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					worker.Stop(ctx)
				})
				canceller := worker
				if from == "elsewhere" {
					if canceller, err = keel.NewClient(keel.Config{Driver: drv, Types: []string{"slow"}, Logger: log}); err != nil {
						t.Fatal(err)
					}
				}
				info := enqueue(t, worker, "slow", map[string]int{"n": 1})
				select {
				case <-arrived:
				case <-time.After(10 * time.Second):
					t.Fatal("the target got no request")
				}
				cancelled := time.Now()
				if _, err := canceller.Cancel(t.Context(), info.ID); err != nil {
					t.Fatal(err)
				}
				select {
				case at := <-aborted:
					t.Logf("request aborted %v after the cancel", at.Sub(cancelled))
				case <-time.After(10 * time.Second):
					t.Fatal("the target's request went on after the task was cancelled")
				}
				ti, err := worker.Get(t.Context(), info.ID)
				if err != nil {
					t.Fatal(err)
				}
				if ti.State != keel.StateCancelled || len(ti.Errors) != 1 {
					t.Fatalf("after the cancel: %s, history %+v; want cancelled with the attempt in its history", ti.State, ti.Errors)
				}
				if e := ti.Errors[0]; e.Attempt != 1 || e.Outcome != keel.OutcomeCancelled || e.Node != worker.Node() ||
					!e.Start.Equal(ti.AttemptedAt) || !e.End.Equal(ti.FinishedAt) {
					t.Fatalf("history %+v, want attempt 1 on %s from %v to %v, outcome cancelled", e, worker.Node(), ti.AttemptedAt, ti.FinishedAt)
				}
				if n := len(tg.requests("/slow")); n != 1 {
					t.Fatalf("the target got %d requests, want 1", n)
				}
			})
		}
	}
}
