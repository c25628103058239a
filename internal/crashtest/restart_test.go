package crashtest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/internal/proctest"
	"github.com/keelq/keel/internal/testdb"
)

// privateTarget starts a database server of the test's own for b and makes
// the test's database on it: the restart scenario stops and starts only
// that server, never the machine's.
func privateTarget(t *testing.T, b *backend) (*testdb.Server, target) {
	t.Helper()
	ctx := context.Background()
	switch b {
	case postgresBackend:
		srv := testdb.PrivatePostgres(t)
		conn, err := pgx.Connect(ctx, srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `CREATE SCHEMA keel_crash`); err != nil {
			t.Fatal(err)
		}
		return srv, target{DSN: srv.DSN, Schema: "keel_crash"}
	case mariadbBackend:
		srv := testdb.PrivateMariaDB(t)
		db, err := sql.Open("mysql", srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, "CREATE DATABASE keel_crash"); err != nil {
			t.Fatal(err)
		}
		cfg, err := gomysql.ParseDSN(srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DBName = "keel_crash"
		return srv, target{DSN: cfg.FormatDSN()}
	}
	t.Fatalf("no private server for %s", b.name)
	return nil, target{}
}

// TestPostgresRestart runs the restart scenario on a private PostgreSQL
// server (initdb in a temporary directory, on a free port).
func TestPostgresRestart(t *testing.T) { restart(t, postgresBackend) }

// TestMariaDBRestart runs the restart scenario on a private MariaDB server
// (mariadb-install-db in a temporary directory, on a free port).
func TestMariaDBRestart(t *testing.T) { restart(t, mariadbBackend) }

// restart: the server stops and starts again while three workers run and
// the test enqueues. No enqueue is acknowledged while it is down; workers
// and enqueuer reconnect on their own, and the same worker processes finish
// the work; every enqueue that returned success is stored and succeeds, no
// task is left behind, and every task's effect is applied exactly once.
func restart(t *testing.T, b *backend) {
	srv, tg := privateTarget(t, b)
	e := setupTarget(t, b, tg)
	enq := e.enqueuer(e.app)
	const preload = 2000
	e.enqueue(preload)
	var workers []*worker
	for _, n := range []string{"r1", "r2", "r3"} {
		workers = append(workers, e.startWorker(n, 10*time.Millisecond))
	}
	stop := make(chan struct{})
	acked, failed, wg := e.enqueueLoop(enq, 4, stop)
	time.Sleep(1500 * time.Millisecond)

	stoppedAt := time.Now()
	if err := srv.Stop(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("stop %s: %v", b.name, err)
	}
	down := time.Since(stoppedAt)
	// An enqueue answered just before the server went may still be on its
	// way into acked; give it a moment before counting.
	time.Sleep(300 * time.Millisecond)
	ackedDown := len(acked())
	time.Sleep(1700 * time.Millisecond)
	if n := len(acked()); n != ackedDown {
		t.Errorf("%d enqueues acknowledged while the server was down", n-ackedDown)
	}
	if err := srv.Start(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("start %s: %v", b.name, err)
	}
	t.Logf("%s stopped in %v; down and back after %v", b.name, down, time.Since(stoppedAt))
	ackedBefore := len(acked())
	time.Sleep(3 * time.Second) // enqueues after the restart must succeed again
	close(stop)
	wg.Wait()
	ids := acked()
	t.Logf("%d enqueues acknowledged (%d after the restart), %d failed", len(ids), len(ids)-ackedBefore, failed())
	if len(ids) == ackedBefore {
		t.Fatal("no enqueue succeeded after the restart: the enqueuer did not reconnect")
	}
	total := e.taskCount()
	if total < int64(preload+len(ids)) {
		t.Fatalf("%d tasks stored, fewer than the %d preloaded plus %d acknowledged", total, preload, len(ids))
	}
	e.waitAllSucceeded(total, 60*time.Second)
	e.checkAcked(ids)
	e.checkExactlyOnce(total)
	// The same processes did the work: none gave up when the server went.
	for _, w := range workers {
		select {
		case <-w.Exited:
			t.Errorf("worker %s exited during the test:\n%s", w.Name, proctest.Tail(w.Stderr.String(), 4096))
		default:
		}
	}
	t.Logf("all %d tasks succeeded %v after the server stopped", total, time.Since(stoppedAt))
}
