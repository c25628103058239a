package mysqlcrashtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests re-execute this test binary as a worker process, told what to
// do through these variables.
const (
	envDSN   = "KEEL_MYSQLCRASH_DSN"
	envNode  = "KEEL_MYSQLCRASH_NODE"
	envDelay = "KEEL_MYSQLCRASH_DELAY"
)

const taskType = "mysqlcrash.task"

// The workers' timing: short, so rescues happen within a test's budget.
const (
	leaseTTL          = 2 * time.Second
	heartbeatInterval = 500 * time.Millisecond
	rescueInterval    = 500 * time.Millisecond
	pollInterval      = 100 * time.Millisecond
	maxWorkers        = 16
)

// slack is added to timing bounds, for a loaded machine (-race, two cores,
// other packages' tests running).
const slack = 4 * time.Second

type job struct {
	N int `json:"n"`
}

// baseDSN is the server (a go-sql-driver DSN); KEEL_TEST_MYSQL overrides it.
func baseDSN() string {
	if dsn := os.Getenv("KEEL_TEST_MYSQL"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

// dsnFor is baseDSN on database name.
func dsnFor(t testing.TB, name string) string {
	cfg, err := gomysql.ParseDSN(baseDSN())
	if err != nil {
		t.Fatalf("KEEL_TEST_MYSQL: %v", err)
	}
	cfg.DBName = name
	return cfg.FormatDSN()
}

// TestHelperProcess is not a test: it is the worker process the tests start
// and kill. It never returns on its own.
func TestHelperProcess(t *testing.T) {
	dsn := os.Getenv(envDSN)
	if dsn == "" {
		t.Skip("the MySQL crash tests run this as a subprocess")
	}
	// A helper that outlives its test (the parent died) ends itself.
	time.AfterFunc(3*time.Minute, func() { os.Exit(3) })
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "helper: %s: %v\n", what, err)
		os.Exit(2)
	}
	ctx := context.Background()
	node := os.Getenv(envNode)
	delay, err := time.ParseDuration(os.Getenv(envDelay))
	if err != nil {
		fail("delay", err)
	}
	drv, err := mysql.Open(ctx, dsn, mysql.Options{MaxConns: 12})
	if err != nil {
		fail("driver", err)
	}
	h := keel.NewHandlers()
	keel.Handle(h, taskType, func(ctx context.Context, task *keel.Task[job]) error {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		// The business write and the completion commit together or not at all.
		tx, err := drv.DB().BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO effects (task_id, node, attempt) VALUES (?, ?, ?)`,
			task.ID, node, task.Attempt); err != nil {
			tx.Rollback() //nolint:errcheck // the first error is what matters
			return err
		}
		if err := keel.CompleteTx(ctx, tx, nil); err != nil {
			tx.Rollback() //nolint:errcheck // the first error is what matters
			return err
		}
		return tx.Commit()
	})
	c, err := keel.NewClient(keel.Config{
		Driver: drv, Handlers: h, Node: node,
		Queues:   map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: maxWorkers}},
		LeaseTTL: leaseTTL, HeartbeatInterval: heartbeatInterval, RescueInterval: rescueInterval,
		PollInterval: pollInterval, BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		BackoffJitter: -1, MaxAttempts: 100, Timeout: 30 * time.Second, TimeoutGrace: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fail("client", err)
	}
	if err := c.Start(ctx); err != nil {
		fail("start", err)
	}
	fmt.Println("ready")
	select {}
}

// env is one test's bundle: its own database, a control handle on it, a
// driver and an enqueue-only client.
type env struct {
	t      *testing.T
	ctx    context.Context
	dbName string
	dsn    string
	db     *sql.DB // control queries
	drv    *mysql.Driver
	client *keel.Client
}

func setup(t *testing.T) *env {
	t.Helper()
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	name := "keel_crash_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	admin, err := sql.Open("mysql", baseDSN())
	if err == nil {
		err = admin.PingContext(ctx)
	}
	if err != nil {
		t.Fatalf("these tests need MySQL or MariaDB at %s (start it, or set KEEL_TEST_MYSQL): %v", baseDSN(), err)
	}
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(cctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	dsn := dsnFor(t, name)
	drv, err := mysql.Open(ctx, dsn, mysql.Options{MaxConns: 4})
	if err != nil {
		t.Fatalf("open database %s: %v", name, err)
	}
	t.Cleanup(func() { drv.Close() })
	if _, err := drv.DB().ExecContext(ctx, `CREATE TABLE effects (task_id BIGINT NOT NULL, node VARCHAR(255) NOT NULL,
		attempt INT NOT NULL, KEY (task_id)) ENGINE = InnoDB`); err != nil {
		t.Fatal(err)
	}
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{taskType}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, dbName: name, dsn: dsn, db: drv.DB(), drv: drv, client: c}
}

// worker is one worker process.
type worker = proctest.Proc

// startWorker starts a worker process and waits until it runs.
func (e *env) startWorker(node string, delay time.Duration) *worker {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=4m")
	cmd.Env = append(os.Environ(), envDSN+"="+e.dsn, envNode+"="+node, envDelay+"="+delay.String())
	return proctest.Start(e.t, node, cmd)
}

// kill SIGKILLs the worker and waits until it is gone; it returns the time
// just before the signal.
func (e *env) kill(w *worker) time.Time {
	e.t.Helper()
	return w.Kill(e.t)
}

// enqueue stores n tasks in batches and returns their ids.
func (e *env) enqueue(n int) []int64 {
	e.t.Helper()
	var ids []int64
	for start := 0; start < n; start += 1000 {
		jobs := make([]keel.Job, 0, 1000)
		for i := start; i < min(n, start+1000); i++ {
			jobs = append(jobs, keel.Job{Type: taskType, Payload: job{N: i}})
		}
		infos, err := e.client.EnqueueMany(e.ctx, jobs)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, in := range infos {
			ids = append(ids, in.ID)
		}
	}
	return ids
}

func (e *env) counts() map[driver.State]int64 {
	e.t.Helper()
	rows, err := e.drv.Counts(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[driver.State]int64{}
	for _, r := range rows {
		out[r.State] += r.Count
	}
	return out
}

// waitFor polls cond every 20ms and fails the test after timeout.
func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %v waiting for %s (task states %v)", timeout, what, e.counts())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leader returns the node holding the maintenance lease, or "".
func (e *env) leader() string {
	e.t.Helper()
	var owner string
	err := e.db.QueryRowContext(e.ctx, `SELECT owner FROM keel_leaders WHERE name = 'maintenance' AND expires_at > UTC_TIMESTAMP(6)`).Scan(&owner)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		e.t.Fatal(err)
	}
	return owner
}

// ints runs a query returning one BIGINT column.
func (e *env) ints(query string, args ...any) []int64 {
	e.t.Helper()
	rows, err := e.db.QueryContext(e.ctx, query, args...)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// runningOf returns the ids of tasks running under owner.
func (e *env) runningOf(owner string) []int64 {
	e.t.Helper()
	return e.ints(`SELECT id FROM keel_tasks WHERE state = 'running' AND lease_owner = ? ORDER BY id`, owner)
}

// waitAllSucceeded waits until total tasks exist and all succeeded.
func (e *env) waitAllSucceeded(total int64, timeout time.Duration) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("all %d tasks to succeed", total), timeout, func() bool {
		return e.counts()[driver.StateSucceeded] == total
	})
}

// taskCount is how many tasks the database holds.
func (e *env) taskCount() int64 {
	e.t.Helper()
	var n int64
	if err := e.db.QueryRowContext(e.ctx, `SELECT count(*) FROM keel_tasks`).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// checkExactlyOnce checks that every task succeeded, none is in another
// state (none left running), and each has exactly one effect row, written
// by its final (succeeding) attempt; and that no effect belongs to no task.
func (e *env) checkExactlyOnce(total int64) {
	e.t.Helper()
	if c := e.counts(); c[driver.StateSucceeded] != total || len(c) != 1 {
		e.t.Fatalf("final states %v, want all %d succeeded", c, total)
	}
	var tasks, effects, distinct, bad, orphans int64
	err := e.db.QueryRowContext(e.ctx, `SELECT
		(SELECT count(*) FROM keel_tasks),
		(SELECT count(*) FROM effects),
		(SELECT count(DISTINCT task_id) FROM effects),
		(SELECT count(*) FROM keel_tasks k
			LEFT JOIN (SELECT task_id, count(*) AS n, max(attempt) AS attempt FROM effects GROUP BY task_id) f
			ON f.task_id = k.id
			WHERE f.n IS NULL OR f.n <> 1 OR f.attempt <> k.attempt),
		(SELECT count(*) FROM effects f LEFT JOIN keel_tasks k ON k.id = f.task_id WHERE k.id IS NULL)`).
		Scan(&tasks, &effects, &distinct, &bad, &orphans)
	if err != nil {
		e.t.Fatal(err)
	}
	if tasks != total || effects != total || distinct != total || bad != 0 || orphans != 0 {
		dups := e.ints(`SELECT task_id FROM effects GROUP BY task_id HAVING count(*) > 1 ORDER BY task_id LIMIT 10`)
		e.t.Fatalf("tasks %d, effect rows %d for %d tasks, %d tasks without exactly one effect from their final attempt, %d effects without a task (want %d, %d, %d, 0, 0); duplicated: %v",
			tasks, effects, distinct, bad, orphans, total, total, total, dups)
	}
}

// rescued returns the tasks whose error history has a lease_expired entry.
func (e *env) rescued() []driver.TaskRow {
	e.t.Helper()
	ids := e.ints(`SELECT id FROM keel_tasks WHERE JSON_CONTAINS(errors, '{"outcome": "lease_expired"}') ORDER BY id`)
	out := make([]driver.TaskRow, 0, len(ids))
	for _, id := range ids {
		r, err := e.drv.Get(e.ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		if !slices.ContainsFunc(r.Errors, func(ae driver.AttemptError) bool { return ae.Outcome == driver.OutcomeLeaseExpired }) {
			e.t.Fatalf("task %d: JSON_CONTAINS found lease_expired, its error history does not: %+v", id, r.Errors)
		}
		out = append(out, *r)
	}
	return out
}

type enqueuer interface {
	Enqueue(ctx context.Context, taskType string, payload any, opts ...keel.Option) (*keel.TaskInfo, error)
}

// enqueuer returns an enqueue-only client on its own driver (its own
// connections) on the test's database.
func (e *env) enqueuer() *keel.Client {
	e.t.Helper()
	drv, err := mysql.Open(e.ctx, e.dsn, mysql.Options{MaxConns: 4})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { drv.Close() })
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{taskType}})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// enqueueLoop enqueues one task at a time from n goroutines until stop is
// closed, counting failures (expected while the server is down) and
// recording every acknowledged id. Each enqueue is bounded by a timeout.
func (e *env) enqueueLoop(c enqueuer, n int, stop <-chan struct{}) (acked func() []int64, failed func() int, wg *sync.WaitGroup) {
	var mu sync.Mutex
	var ids []int64
	fails := 0
	wg = &sync.WaitGroup{}
	for g := range n {
		wg.Go(func() {
			for i := g; ; i += n {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
				info, err := c.Enqueue(ctx, taskType, job{N: i})
				cancel()
				mu.Lock()
				if err != nil {
					fails++
				} else {
					ids = append(ids, info.ID)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	acked = func() []int64 { mu.Lock(); defer mu.Unlock(); return slices.Clone(ids) }
	failed = func() int { mu.Lock(); defer mu.Unlock(); return fails }
	return acked, failed, wg
}

// checkAcked checks that every acknowledged task exists and succeeded.
func (e *env) checkAcked(ids []int64) {
	e.t.Helper()
	for _, id := range ids {
		r, err := e.drv.Get(e.ctx, id)
		if err != nil {
			e.t.Fatalf("acknowledged task %d: %v", id, err)
		}
		if r.State != driver.StateSucceeded {
			e.t.Fatalf("acknowledged task %d: state %s, want succeeded", id, r.State)
		}
	}
}
