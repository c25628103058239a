package crashtest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/internal/proctest"
)

// server is a local database server the restart scenario stops and starts.
type server struct {
	name string
	env  string   // the variable that allows stopping it
	cmds []string // the commands stop and start need
	up   func() bool
	// stop stops the server (like a crash where it can) and returns once
	// it is gone; start starts it and returns once it answers.
	stop, start func() error
}

// ensure starts the server if it is down.
func (s *server) ensure(t *testing.T) {
	if s.up() {
		return
	}
	if err := s.start(); err != nil {
		t.Errorf("start %s: %v", s.name, err)
	}
}

// waitUntil polls cond every 200ms for up to d.
func waitUntil(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// runCmd runs name with args and names them in its error.
func runCmd(name string, args ...string) error {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pgCluster runs pg_ctlcluster action on the local cluster (the command
// .ci/run starts PostgreSQL with).
func pgCluster(action string, extra ...string) error {
	versions, err := os.ReadDir("/etc/postgresql")
	if err != nil || len(versions) != 1 {
		return fmt.Errorf("find the PostgreSQL cluster in /etc/postgresql: %d versions, %v", len(versions), err)
	}
	return runCmd("pg_ctlcluster", append([]string{"--skip-systemctl-redirect", versions[0].Name(), "main", action}, extra...)...)
}

func pgUp() bool {
	return exec.Command("pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432").Run() == nil
}

var postgresServer = &server{
	name: "PostgreSQL",
	env:  "KEEL_TEST_PG_RESTART",
	cmds: []string{"pg_ctlcluster", "pg_isready"},
	up:   pgUp,
	// Immediate mode: like a crash, no checkpoint, sessions cut.
	stop: func() error { return pgCluster("stop", "-m", "immediate") },
	start: func() error {
		if err := pgCluster("start"); err != nil {
			return err
		}
		if !waitUntil(40*time.Second, pgUp) {
			return fmt.Errorf("PostgreSQL not ready 40s after start")
		}
		return nil
	},
}

// mariadbd is the server binary .ci/run starts MariaDB with.
const mariadbd = "/usr/sbin/mariadbd"

// mariaDBProcessRunning reports whether a mariadbd process is still alive
// (it may be shutting down and no longer answer pings).
func mariaDBProcessRunning() bool {
	return exec.Command("start-stop-daemon", "--status", "--exec", mariadbd).Run() == nil
}

func mariaDBUp() bool {
	return exec.Command("mysqladmin", "-h", "127.0.0.1", "-u", "root", "ping").Run() == nil
}

var mariadbServer = &server{
	name: "MariaDB",
	env:  "KEEL_TEST_MARIADB_RESTART",
	cmds: []string{"mysqladmin", "start-stop-daemon", mariadbd},
	up:   mariaDBUp,
	stop: func() error {
		if err := runCmd("mysqladmin", "-h", "127.0.0.1", "-u", "root", "shutdown"); err != nil {
			return err
		}
		if !waitUntil(60*time.Second, func() bool { return !mariaDBProcessRunning() }) {
			return fmt.Errorf("%s still running 60s after shutdown", mariadbd)
		}
		return nil
	},
	start: func() error {
		// A server still shutting down would make --oknodo start nothing.
		waitUntil(60*time.Second, func() bool { return mariaDBUp() || !mariaDBProcessRunning() })
		if !mariaDBUp() {
			if err := runCmd("start-stop-daemon", "--start", "--oknodo", "--background", "--exec", mariadbd); err != nil {
				return err
			}
		}
		if !waitUntil(60*time.Second, mariaDBUp) {
			return fmt.Errorf("MariaDB not answering pings 60s after start")
		}
		return nil
	},
}

// TestPostgresRestart runs the restart scenario on PostgreSQL. It stops
// the shared server, so it runs only with KEEL_TEST_PG_RESTART=1, never in
// parallel with other packages' tests (.ci/run runs it alone).
func TestPostgresRestart(t *testing.T) { restart(t, postgresBackend, postgresServer) }

// TestMariaDBRestart runs the restart scenario on MariaDB. It stops the
// shared server, so it runs only with KEEL_TEST_MARIADB_RESTART=1, never in
// parallel with other packages' tests (.ci/run runs it alone).
func TestMariaDBRestart(t *testing.T) { restart(t, mariadbBackend, mariadbServer) }

// restart: the server stops and starts again while three workers run and
// the test enqueues. No enqueue is acknowledged while it is down; workers
// and enqueuer reconnect on their own, and the same worker processes finish
// the work; every enqueue that returned success is stored and succeeds, no
// task is left behind, and every task's effect is applied exactly once.
func restart(t *testing.T, b *backend, srv *server) {
	if os.Getenv(srv.env) != "1" {
		t.Skipf("stops the shared %s server: set %s=1 and run it alone (.ci/run does)", srv.name, srv.env)
	}
	for _, cmd := range srv.cmds {
		if _, err := exec.LookPath(cmd); err != nil {
			t.Fatalf("%s=1 needs %s: %v", srv.env, cmd, err)
		}
	}
	srv.ensure(t)
	t.Cleanup(func() { srv.ensure(t) }) // registered first, so it runs last
	e := setup(t, b)
	// Registered after setup's, so it runs before them: the test database
	// is dropped on a running server even when the test failed while it
	// was down.
	t.Cleanup(func() { srv.ensure(t) })
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
	if err := srv.stop(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("stop %s: %v", srv.name, err)
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
	if err := srv.start(); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("start %s: %v", srv.name, err)
	}
	t.Logf("%s stopped in %v; down and back after %v", srv.name, down, time.Since(stoppedAt))
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
