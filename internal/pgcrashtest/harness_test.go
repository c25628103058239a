package pgcrashtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The tests re-execute this test binary as a worker process, told what to
// do through these variables.
const (
	envDSN    = "KEEL_PGCRASH_DSN"
	envSchema = "KEEL_PGCRASH_SCHEMA"
	envNode   = "KEEL_PGCRASH_NODE"
	envDelay  = "KEEL_PGCRASH_DELAY"
)

const taskType = "pgcrash.task"

// The workers' timing: short, so rescues happen within a test's budget.
const (
	leaseTTL          = 2 * time.Second
	heartbeatInterval = 500 * time.Millisecond
	rescueInterval    = 500 * time.Millisecond
	pollInterval      = 100 * time.Millisecond
	maxWorkers        = 16
)

type job struct {
	N int `json:"n"`
}

// baseDSN is the test database; KEEL_TEST_POSTGRES overrides it.
func baseDSN() string {
	if dsn := os.Getenv("KEEL_TEST_POSTGRES"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// dsnWith adds query parameters (application_name, pool_max_conns) to a
// URL-form DSN.
func dsnWith(dsn string, params map[string]string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// TestHelperProcess is not a test: it is the worker process the tests start
// and kill. It never returns on its own.
func TestHelperProcess(t *testing.T) {
	dsn := os.Getenv(envDSN)
	if dsn == "" {
		t.Skip("the PostgreSQL crash tests run this as a subprocess")
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
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		fail("pool", err)
	}
	drv, err := postgres.New(ctx, pool, postgres.Options{Schema: os.Getenv(envSchema)})
	if err != nil {
		fail("driver", err)
	}
	effects := pgx.Identifier{os.Getenv(envSchema), "effects"}.Sanitize()
	h := keel.NewHandlers()
	keel.Handle(h, taskType, func(ctx context.Context, task *keel.Task[job]) error {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		// The business write and the completion commit together or not at all.
		return pgx.BeginFunc(ctx, drv.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO `+effects+` (task_id, node, attempt) VALUES ($1, $2, $3)`,
				task.ID, node, task.Attempt); err != nil {
				return err
			}
			return keel.CompleteTx(ctx, tx, nil)
		})
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

// env is one test's bundle: its own schema, a control pool (not touched by
// session kills), a driver and an enqueue-only client on it.
type env struct {
	t      *testing.T
	ctx    context.Context
	schema string
	app    string // application_name of the workers' sessions
	pool   *pgxpool.Pool
	drv    *postgres.Driver
	client *keel.Client
}

func setup(t *testing.T, name string) *env {
	t.Helper()
	var b [4]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	schema := "keel_pgcrash_" + name + "_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsnWith(baseDSN(), map[string]string{"application_name": "keel_pgcrash_ctl", "pool_max_conns": "4"}))
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("these tests need PostgreSQL at %s (start it, or set KEEL_TEST_POSTGRES): %v", baseDSN(), err)
	}
	t.Cleanup(pool.Close)
	drv, err := postgres.New(ctx, pool, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		drv.Close()
		if _, err := pool.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	if _, err := pool.Exec(ctx, `CREATE TABLE `+schema+`.effects (task_id bigint NOT NULL, node text NOT NULL, attempt integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: []string{taskType}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, schema: schema, app: "keel_pgcrash_" + hex.EncodeToString(b[:]), pool: pool, drv: drv, client: c}
}

// worker is one worker process.
type worker = proctest.Proc

// startWorker starts a worker process and waits until it runs.
func (e *env) startWorker(node string, delay time.Duration) *worker {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=4m")
	dsn := dsnWith(baseDSN(), map[string]string{"application_name": e.app, "pool_max_conns": "12"})
	cmd.Env = append(os.Environ(), envDSN+"="+dsn, envSchema+"="+e.schema, envNode+"="+node, envDelay+"="+delay.String())
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
	err := e.pool.QueryRow(e.ctx, `SELECT owner FROM `+e.schema+`.keel_leaders WHERE name = 'maintenance' AND expires_at > now()`).Scan(&owner)
	if err != nil && err != pgx.ErrNoRows {
		e.t.Fatal(err)
	}
	return owner
}

// runningOf returns the ids of tasks running under owner.
func (e *env) runningOf(owner string) []int64 {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT id FROM `+e.schema+`.keel_tasks WHERE state = 'running' AND lease_owner = $1 ORDER BY id`, owner)
	if err != nil {
		e.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		e.t.Fatal(err)
	}
	return ids
}

// waitAllSucceeded waits until total tasks exist and all succeeded.
func (e *env) waitAllSucceeded(total int64, timeout time.Duration) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("all %d tasks to succeed", total), timeout, func() bool {
		c := e.counts()
		return c[driver.StateSucceeded] == total
	})
}

// checkExactlyOnce checks that every task succeeded, none is in another
// state, and each has exactly one effect row, written by its final
// (succeeding) attempt; and that no effect belongs to no task.
func (e *env) checkExactlyOnce(total int64) {
	e.t.Helper()
	if c := e.counts(); c[driver.StateSucceeded] != total || len(c) != 1 {
		e.t.Fatalf("final states %v, want all %d succeeded", c, total)
	}
	var tasks, effects, distinct, bad int64
	err := e.pool.QueryRow(e.ctx, `SELECT
		(SELECT count(*) FROM `+e.schema+`.keel_tasks),
		(SELECT count(*) FROM `+e.schema+`.effects),
		(SELECT count(DISTINCT task_id) FROM `+e.schema+`.effects),
		(SELECT count(*) FROM `+e.schema+`.keel_tasks k
			LEFT JOIN (SELECT task_id, count(*) AS n, max(attempt) AS attempt FROM `+e.schema+`.effects GROUP BY task_id) f
			ON f.task_id = k.id
			WHERE f.n IS DISTINCT FROM 1 OR f.attempt <> k.attempt)`).Scan(&tasks, &effects, &distinct, &bad)
	if err != nil {
		e.t.Fatal(err)
	}
	if tasks != total || effects != total || distinct != total || bad != 0 {
		var sample string
		e.pool.QueryRow(e.ctx, `SELECT coalesce(string_agg(task_id::text || ':' || n::text, ' '), '') FROM (SELECT task_id, count(*) n FROM `+ //nolint:errcheck // diagnostics only
			e.schema+`.effects GROUP BY task_id HAVING count(*) > 1 LIMIT 10) d`).Scan(&sample)
		e.t.Fatalf("tasks %d, effect rows %d for %d tasks, %d tasks without exactly one effect from their final attempt (want %d, %d, %d, 0); duplicated: %s",
			tasks, effects, distinct, bad, total, total, total, sample)
	}
}

// rescued returns the tasks whose error history has a lease_expired entry.
func (e *env) rescued() []driver.TaskRow {
	e.t.Helper()
	rows, err := e.pool.Query(e.ctx, `SELECT id FROM `+e.schema+`.keel_tasks WHERE errors @> '[{"outcome": "lease_expired"}]' ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]driver.TaskRow, 0, len(ids))
	for _, id := range ids {
		r, err := e.drv.Get(e.ctx, id)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, *r)
	}
	return out
}

// nextStart is when the attempt after attempt began: the start of its error
// entry, or the task's current attempt.
func nextStart(r driver.TaskRow, attempt int) (time.Time, bool) {
	for _, ae := range r.Errors {
		if ae.Attempt == attempt+1 {
			return ae.Start, true
		}
	}
	if r.Attempt == attempt+1 {
		return r.AttemptedAt, true
	}
	return time.Time{}, false
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

type enqueuer interface {
	Enqueue(ctx context.Context, taskType string, payload any, opts ...keel.Option) (*keel.TaskInfo, error)
}

// enqueuer returns an enqueue-only client on its own pool whose sessions
// carry application_name app.
func (e *env) enqueuer(app string) *keel.Client {
	e.t.Helper()
	pool, err := pgxpool.New(e.ctx, dsnWith(baseDSN(), map[string]string{"application_name": app, "pool_max_conns": "4"}))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	drv, err := postgres.New(e.ctx, pool, postgres.Options{Schema: e.schema})
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
