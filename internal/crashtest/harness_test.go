package crashtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests re-execute this test binary as a worker or enqueuer process,
// told what to do through these variables.
const (
	envBackend = "KEEL_CRASHTEST_BACKEND" // a key of backends
	envDSN     = "KEEL_CRASHTEST_DSN"
	envSchema  = "KEEL_CRASHTEST_SCHEMA"
	envApp     = "KEEL_CRASHTEST_APP"
	envMode    = "KEEL_CRASHTEST_MODE" // "work", "brake", "enqueue", "schedule", …
	envNode    = "KEEL_CRASHTEST_NODE"
	envDelay   = "KEEL_CRASHTEST_DELAY"
)

const taskType = "crash.task"

// The workers' timing: short, so rescues happen within a test's budget.
const (
	leaseTTL          = 2 * time.Second
	heartbeatInterval = 500 * time.Millisecond
	rescueInterval    = 500 * time.Millisecond
	pollInterval      = 100 * time.Millisecond
	maxWorkers        = 16
)

// slack is added to every timing bound, for a loaded machine (-race, two
// cores, other packages' tests running).
const slack = 4 * time.Second

type job struct {
	N int `json:"n"`
}

// target is where one test's database is.
type target struct {
	DSN    string // a file path for SQLite
	Schema string // PostgreSQL only
}

// backend is one database the scenarios run against: how to make a test's
// own database, open it, and the few statements that differ.
type backend struct {
	name string
	// create makes the test's own database, dropped when the test ends.
	create func(t *testing.T) target
	// open opens a driver on tg and a database/sql handle on the same
	// database; app names the sessions where the database can (PostgreSQL),
	// conns bounds the connections. close releases both.
	open func(ctx context.Context, tg target, app string, conns int) (drv driver.Driver, db *sql.DB, close func(), err error)
	// rebind turns the ? placeholders of a statement into the database's.
	rebind func(query string) string
	// timeArg is a time as the database's timestamp columns compare it.
	timeArg func(time.Time) any
	// effectsDDL creates the effects table the handler writes.
	effectsDDL string
	// brakeTasks is how many tasks the killed-workers brake scenario's
	// three processes drain.
	brakeTasks int
	// batchTasks is how many members the batch of the batch-under-kills
	// scenario has.
	batchTasks int
	// terminate ends every session of application app but the caller's and
	// returns how many it ended; nil where the database cannot tell the
	// workers' sessions apart.
	terminate func(e *env, app string) (int64, error)
}

// TestHelperProcess is not a test: it is the worker or enqueuer process the
// scenarios start and kill. It never returns on its own.
func TestHelperProcess(t *testing.T) {
	b := backends[os.Getenv(envBackend)]
	if b == nil {
		t.Skip("the crash tests run this as a subprocess")
	}
	// A helper that outlives its test (the parent died) ends itself.
	time.AfterFunc(3*time.Minute, func() { os.Exit(3) })
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "helper: %s: %v\n", what, err)
		os.Exit(2)
	}
	ctx := context.Background()
	drv, db, _, err := b.open(ctx, target{DSN: os.Getenv(envDSN), Schema: os.Getenv(envSchema)}, os.Getenv(envApp), 12)
	if err != nil {
		fail("open", err)
	}
	delay := func() time.Duration {
		d, err := time.ParseDuration(os.Getenv(envDelay))
		if err != nil {
			fail("delay", err)
		}
		return d
	}
	// serve starts a worker client and runs until the test kills it.
	serve := func(c *keel.Client, err error) {
		if err != nil {
			fail("client", err)
		}
		if err := c.Start(ctx); err != nil {
			fail("start", err)
		}
		fmt.Println("ready")
		select {}
	}
	node := os.Getenv(envNode)
	switch mode := os.Getenv(envMode); mode {
	case "work":
		serve(newWorker(b, drv, db, node, delay()))
	case "brake":
		serve(newBrakeWorker(b, drv, db, node, delay()))
	case "fail":
		serve(newFailWorker(drv, node, delay()))
	case "limited":
		serve(newLimitedWorker(b, drv, db, node, delay()))
	case "schedule":
		serve(newScheduler(drv, node))
	case "batch":
		serve(newBatchWorker(b, drv, db, node, delay()))
	case "diamond":
		serve(newDiamondWorker(b, drv, db, node, delay()))
	case "sequence":
		serve(newSequenceWorker(b, drv, db, node, delay()))
	case "enqueue":
		c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{taskType}})
		if err != nil {
			fail("client", err)
		}
		// Several enqueuers, so group commits are in flight when the kill lands.
		var out sync.Mutex
		for g := range 8 {
			go func() {
				for i := g; ; i += 8 {
					info, err := c.Enqueue(ctx, taskType, job{N: i})
					if err != nil {
						fail("enqueue", err)
					}
					out.Lock()
					fmt.Printf("acked %d %d\n", info.ID, i)
					out.Unlock()
				}
			}()
		}
		select {}
	default:
		fail("mode", fmt.Errorf("unknown mode %q", mode))
	}
}

// newWorker returns a client whose handler sleeps for delay (watching its
// context), then records the task's effect in the effects table and
// completes the task in the same transaction: both commit or neither.
func newWorker(b *backend, drv driver.Driver, db *sql.DB, node string, delay time.Duration) (*keel.Client, error) {
	return keel.NewClient(workerConfig(b, drv, db, node, delay))
}

// workerConfig is newWorker's configuration.
func workerConfig(b *backend, drv driver.Driver, db *sql.DB, node string, delay time.Duration) keel.Config {
	insert := b.rebind(`INSERT INTO effects (task_id, node, attempt) VALUES (?, ?, ?)`)
	h := keel.NewHandlers()
	keel.Handle(h, taskType, func(ctx context.Context, task *keel.Task[job]) error {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
		if _, err := tx.ExecContext(ctx, insert, task.ID, node, task.Attempt); err != nil {
			return err
		}
		if err := keel.CompleteTx(ctx, tx, nil); err != nil {
			return err
		}
		return tx.Commit()
	})
	return keel.Config{
		Driver: drv, Handlers: h, Node: node,
		Queues:   map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: maxWorkers}},
		LeaseTTL: leaseTTL, HeartbeatInterval: heartbeatInterval, RescueInterval: rescueInterval,
		PollInterval: pollInterval, BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		BackoffJitter: -1, MaxAttempts: 100, Timeout: 30 * time.Second, TimeoutGrace: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
}

// env is one scenario's bundle: its own database with an effects table, a
// control driver and database/sql handle on it (whose sessions are never
// terminated), and an enqueue-only client.
type env struct {
	t      *testing.T
	b      *backend
	ctx    context.Context
	tg     target
	app    string // names the workers' sessions
	drv    driver.Driver
	db     *sql.DB
	client *keel.Client
}

func setup(t *testing.T, b *backend) *env {
	t.Helper()
	return setupTarget(t, b, b.create(t))
}

// setupTarget is setup on a database made elsewhere (a private server's).
func setupTarget(t *testing.T, b *backend, tg target) *env {
	t.Helper()
	ctx := context.Background()
	drv, db, closeDB, err := b.open(ctx, tg, "keel_crash_ctl", 4)
	if err != nil {
		t.Fatalf("open the %s test database: %v", b.name, err)
	}
	t.Cleanup(closeDB)
	if _, err := db.ExecContext(ctx, b.effectsDDL); err != nil {
		t.Fatalf("create the effects table: %v", err)
	}
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{taskType}})
	if err != nil {
		t.Fatal(err)
	}
	var r [4]byte
	rand.Read(r[:]) //nolint:errcheck // never fails
	return &env{t: t, b: b, ctx: ctx, tg: tg, app: "keel_crash_" + hex.EncodeToString(r[:]), drv: drv, db: db, client: c}
}

// worker is one worker process.
type worker = proctest.Proc

// helperCmd is this test binary re-executed as a helper in mode.
func (e *env) helperCmd(mode, node string, delay time.Duration) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=4m")
	cmd.Env = append(os.Environ(), envBackend+"="+e.b.name, envDSN+"="+e.tg.DSN, envSchema+"="+e.tg.Schema,
		envApp+"="+e.app, envMode+"="+mode, envNode+"="+node, envDelay+"="+delay.String())
	return cmd
}

// startWorker starts a worker process and waits until it runs.
func (e *env) startWorker(node string, delay time.Duration) *worker {
	e.t.Helper()
	return proctest.Start(e.t, node, e.helperCmd("work", node, delay))
}

// kill SIGKILLs the worker and waits until it is gone; it returns the time
// just before the signal.
func (e *env) kill(w *worker) time.Time {
	e.t.Helper()
	return w.Kill(e.t)
}

// runAtStep separates the run_at of the tasks enqueue stores, so their
// queue order is strict: a batch enqueued at one instant would put a
// rescued task (run_at + backoff) behind the rest of its batch, a wait that
// depends on the database's speed rather than on keeping its place.
const runAtStep = 10 * time.Millisecond

// enqueue stores n tasks in batches, runnable from n×runAtStep ago to now,
// in order.
func (e *env) enqueue(n int) {
	e.t.Helper()
	first := time.Now().Add(-time.Duration(n) * runAtStep)
	for start := 0; start < n; start += 1000 {
		jobs := make([]keel.TaskSpec, 0, 1000)
		for i := start; i < min(n, start+1000); i++ {
			runAt := keel.RunAt(first.Add(time.Duration(i) * runAtStep))
			jobs = append(jobs, keel.TaskSpec{Type: taskType, Payload: job{N: i}, Options: []keel.Option{runAt}})
		}
		if _, err := e.client.EnqueueMany(e.ctx, jobs); err != nil {
			e.t.Fatal(err)
		}
	}
}

// enqueuer returns an enqueue-only client on a driver of its own (its own
// connections, named app where the database can) on the test's database.
func (e *env) enqueuer(app string) *keel.Client {
	e.t.Helper()
	drv, _, closeDB, err := e.b.open(e.ctx, e.tg, app, 4)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(closeDB)
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{taskType}})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) counts() map[driver.State]int64 {
	e.t.Helper()
	rows, err := e.drv.Counts(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[driver.State]int64{}
	for _, r := range rows {
		if r.Queue == keel.ReservedQueue {
			continue // keel's own tasks (alert deliveries): see userTasks
		}
		st := driver.State(r.Kind)
		if r.Kind == driver.KindRetrying {
			st = driver.StatePending
		}
		out[st] += r.N
	}
	return out
}

// checkCounters has the driver compare the live counters with a count of
// the task table at one snapshot: they must agree, with nothing to
// correct, whatever was killed when.
func (e *env) checkCounters(when string) {
	e.t.Helper()
	fixed, err := e.drv.Reconcile(e.ctx, driver.ReconcileParams{})
	if err != nil {
		e.t.Fatalf("%s: reconcile: %v", when, err)
	}
	if len(fixed) != 0 {
		e.t.Fatalf("%s: the live counters had drifted from the task table: corrections %+v", when, fixed)
	}
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

// waitAllSucceeded waits until total tasks succeeded.
func (e *env) waitAllSucceeded(total int64, timeout time.Duration) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("all %d tasks to succeed", total), timeout, func() bool {
		return e.counts()[driver.StateSucceeded] == total
	})
}

// count runs a query returning one number.
func (e *env) count(query string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.db.QueryRowContext(e.ctx, e.b.rebind(query), args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// ints runs a query returning one integer column.
func (e *env) ints(query string, args ...any) []int64 {
	e.t.Helper()
	rows, err := e.db.QueryContext(e.ctx, e.b.rebind(query), args...)
	if err != nil {
		e.t.Fatalf("%s: %v", query, err)
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

// leader returns the node holding the maintenance lease, or "".
func (e *env) leader() string {
	e.t.Helper()
	var owner string
	err := e.db.QueryRowContext(e.ctx, e.b.rebind(`SELECT owner FROM keel_leaders WHERE name = 'maintenance' AND expires_at > ?`),
		e.b.timeArg(time.Now())).Scan(&owner)
	if err != nil && err != sql.ErrNoRows {
		e.t.Fatal(err)
	}
	return owner
}

// runningOf returns the ids of tasks running under owner.
func (e *env) runningOf(owner string) []int64 {
	e.t.Helper()
	return e.ints(`SELECT id FROM keel_tasks WHERE state = 'running' AND lease_owner = ? ORDER BY id`, owner)
}

// userTasks selects the scenarios' tasks: not keel's own, which keel
// enqueues in its reserved queue when it delivers an alert (a brake that
// opened while the database was down fires one, and it resolves).
const userTasks = `queue <> '` + keel.ReservedQueue + `'`

// taskCount is how many tasks the database holds.
func (e *env) taskCount() int64 {
	e.t.Helper()
	return e.count(`SELECT count(*) FROM keel_tasks WHERE ` + userTasks)
}

// retried returns the tasks past their first attempt.
func (e *env) retried() []driver.TaskRow {
	e.t.Helper()
	var out []driver.TaskRow
	for _, id := range e.ints(`SELECT id FROM keel_tasks WHERE attempt > 1 ORDER BY id`) {
		r, err := e.drv.Get(e.ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, *r)
	}
	return out
}

// expired returns the lease_expired entries of a task's error history.
func expired(r driver.TaskRow) []driver.AttemptError {
	var out []driver.AttemptError
	for _, ae := range r.Errors {
		if ae.Outcome == driver.OutcomeLeaseExpired {
			out = append(out, ae)
		}
	}
	return out
}

// checkExactlyOnce checks that every task succeeded, none is in another
// state (none left running), and each has exactly one effect row, written
// by its final (succeeding) attempt; and that no effect belongs to no task.
func (e *env) checkExactlyOnce(total int64) {
	e.t.Helper()
	e.checkCounters("at the end")
	if c := e.counts(); c[driver.StateSucceeded] != total || len(c) != 1 {
		e.t.Fatalf("final states %v, want all %d succeeded", c, total)
	}
	var tasks, effects, distinct, bad, orphans int64
	err := e.db.QueryRowContext(e.ctx, `SELECT
		(SELECT count(*) FROM keel_tasks WHERE `+userTasks+`),
		(SELECT count(*) FROM effects),
		(SELECT count(DISTINCT task_id) FROM effects),
		(SELECT count(*) FROM keel_tasks k
			LEFT JOIN (SELECT task_id, count(*) AS n, max(attempt) AS attempt FROM effects GROUP BY task_id) f
			ON f.task_id = k.id
			WHERE k.`+userTasks+` AND (f.n IS NULL OR f.n <> 1 OR f.attempt <> k.attempt)),
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

// enqueueLoop enqueues one task at a time from n goroutines until stop is
// closed, counting failures (expected while sessions die or the server is
// down) and recording every acknowledged id. Each enqueue is bounded by a
// timeout.
func (e *env) enqueueLoop(c *keel.Client, n int, stop <-chan struct{}) (acked func() []int64, failed func() int, wg *sync.WaitGroup) {
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

// logLines returns the lines of s containing every one of words.
func logLines(s string, words ...string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}
