package mysqlcrashtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/internal/proctest"
)

// mariadbd is the server binary .ci/run starts MariaDB with.
const mariadbd = "/usr/sbin/mariadbd"

// mariaDBUp reports whether the server answers mysqladmin ping.
func mariaDBUp() bool {
	return exec.Command("mysqladmin", "-h", "127.0.0.1", "-u", "root", "ping").Run() == nil
}

// mariaDBProcessRunning reports whether a mariadbd process is still alive
// (it may be shutting down and no longer answer pings).
func mariaDBProcessRunning() bool {
	return exec.Command("start-stop-daemon", "--status", "--exec", mariadbd).Run() == nil
}

// stopMariaDB shuts the server down and waits (up to 60s) until its
// process is gone.
func stopMariaDB() error {
	if out, err := exec.Command("mysqladmin", "-h", "127.0.0.1", "-u", "root", "shutdown").CombinedOutput(); err != nil {
		return fmt.Errorf("mysqladmin shutdown: %w: %s", err, strings.TrimSpace(string(out)))
	}
	for range 300 {
		if !mariaDBProcessRunning() {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s still running 60s after shutdown", mariadbd)
}

// startMariaDB starts the server (as .ci/run does) and waits up to 60s
// until it answers pings.
func startMariaDB() error {
	// A server still shutting down would make --oknodo start nothing.
	for i := 0; i < 300 && !mariaDBUp() && mariaDBProcessRunning(); i++ {
		time.Sleep(200 * time.Millisecond)
	}
	if !mariaDBUp() {
		if out, err := exec.Command("start-stop-daemon", "--start", "--oknodo", "--background", "--exec", mariadbd).CombinedOutput(); err != nil {
			return fmt.Errorf("start-stop-daemon --start %s: %w: %s", mariadbd, err, strings.TrimSpace(string(out)))
		}
	}
	for range 300 {
		if mariaDBUp() {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("MariaDB not answering pings 60s after start")
}

// ensureMariaDB starts the server if it is down.
func ensureMariaDB(t *testing.T) {
	if mariaDBUp() {
		return
	}
	if err := startMariaDB(); err != nil {
		t.Errorf("start MariaDB: %v", err)
	}
}

// TestMariaDBRestart: the server is shut down and started again while
// three workers run and the test enqueues. Workers and enqueuer reconnect
// on their own; every enqueue that returned success is stored and succeeds,
// no task is left behind, and every task's effect is applied exactly once.
//
// It stops the shared server, so it runs only with
// KEEL_TEST_MARIADB_RESTART=1, never in parallel with other packages' tests
// (.ci/run runs it alone).
func TestMariaDBRestart(t *testing.T) {
	if os.Getenv("KEEL_TEST_MARIADB_RESTART") != "1" {
		t.Skip("stops the shared MariaDB server: set KEEL_TEST_MARIADB_RESTART=1 and run it alone (.ci/run does)")
	}
	for _, cmd := range []string{"mysqladmin", "start-stop-daemon", mariadbd} {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Fatalf("KEEL_TEST_MARIADB_RESTART=1 needs %s: %v", cmd, err)
		}
	}
	ensureMariaDB(t)
	t.Cleanup(func() { ensureMariaDB(t) }) // registered first, so it runs last
	e := setup(t)
	// Registered after setup's, so it runs before them: the database is
	// dropped on a running server even when the test failed while it was down.
	t.Cleanup(func() { ensureMariaDB(t) })
	enq := e.enqueuer()
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
	if err := stopMariaDB(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("stop MariaDB: %v", err)
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
	if err := startMariaDB(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("start MariaDB: %v", err)
	}
	t.Logf("MariaDB shut down in %v; down and back after %v", down, time.Since(stoppedAt))
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
