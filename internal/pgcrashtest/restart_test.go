package pgcrashtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// pgCluster runs pg_ctlcluster action on the local cluster (the command
// .ci/run starts PostgreSQL with).
func pgCluster(action string, extra ...string) error {
	versions, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(versions) != 1 {
		return fmt.Errorf("find the PostgreSQL cluster in /etc/postgresql: %d versions, %v", len(versions), err)
	}
	args := append([]string{"--skip-systemctl-redirect", versions[0].Name(), "main", action}, extra...)
	if out, err := exec.Command("pg_ctlcluster", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctlcluster %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func pgReady() bool {
	return exec.Command("pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432").Run() == nil
}

// ensurePostgres starts the server if it is down and waits until it
// accepts connections.
func ensurePostgres(t *testing.T) {
	if pgReady() {
		return
	}
	if err := pgCluster("start"); err != nil {
		t.Errorf("start PostgreSQL: %v", err)
	}
	for range 60 {
		if pgReady() {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("PostgreSQL not ready 30s after start")
}

// TestPostgresRestart: the server stops (immediate mode: like a crash) and
// starts again while three workers run and the test enqueues. Workers and
// enqueuer reconnect on their own; every enqueue that returned success is
// stored and succeeds, and every task's effect is applied exactly once.
//
// It stops the shared server, so it runs only with KEEL_TEST_PG_RESTART=1,
// never in parallel with other packages' tests (.ci/run runs it alone).
func TestPostgresRestart(t *testing.T) {
	if os.Getenv("KEEL_TEST_PG_RESTART") != "1" {
		t.Skip("stops the shared PostgreSQL server: set KEEL_TEST_PG_RESTART=1 and run it alone (.ci/run does)")
	}
	if _, err := exec.LookPath("pg_ctlcluster"); err != nil {
		t.Fatalf("KEEL_TEST_PG_RESTART=1 needs pg_ctlcluster: %v", err)
	}
	ensurePostgres(t)
	t.Cleanup(func() { ensurePostgres(t) }) // registered first, so it runs last
	e := setup(t, "restart")
	enq := e.enqueuer(e.app)
	const preload = 2000
	e.enqueue(preload)
	for _, n := range []string{"r1", "r2", "r3"} {
		e.startWorker(n, 10*time.Millisecond)
	}
	stop := make(chan struct{})
	acked, failed, wg := e.enqueueLoop(enq, 4, stop)
	time.Sleep(1500 * time.Millisecond)

	stoppedAt := time.Now()
	if err := pgCluster("stop", "-m", "immediate"); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("stop PostgreSQL: %v", err)
	}
	time.Sleep(2 * time.Second)
	if err := pgCluster("start"); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("start PostgreSQL: %v", err)
	}
	for !pgReady() && time.Since(stoppedAt) < 40*time.Second {
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("PostgreSQL down and back after %v", time.Since(stoppedAt))
	ackedBefore := len(acked())
	time.Sleep(2 * time.Second) // enqueues after the restart must succeed again
	close(stop)
	wg.Wait()
	ids := acked()
	t.Logf("%d enqueues acknowledged (%d after the restart), %d failed", len(ids), len(ids)-ackedBefore, failed())
	if len(ids) == ackedBefore {
		t.Fatal("no enqueue succeeded after the restart: the enqueuer did not reconnect")
	}
	var total int64
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM `+e.schema+`.keel_tasks`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	e.waitAllSucceeded(total, 60*time.Second)
	e.checkAcked(ids)
	e.checkExactlyOnce(total)
}
