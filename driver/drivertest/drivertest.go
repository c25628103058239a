// Package drivertest is the conformance suite every keel storage driver
// must pass against a real database.
//
// A driver's own test calls Run with a function that opens a fresh, empty,
// migrated database for one test (a new file, schema or database) and
// registers its Close with t.Cleanup. Every test of the suite gets its own
// database, so the suite runs its tests in parallel.
//
// The suite checks the driver both directly (queries with explicit owners
// and a fake clock, where precision matters) and through keel.Client (the
// engine's use of the driver: handler outcomes, idempotency, transactions,
// fencing, graceful stop). Tests that need the caller's transactions run
// when the driver implements driver.DBer and are skipped otherwise.
package drivertest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
)

// Opener opens a fresh, empty, migrated database for the test t and
// registers its Close with t.Cleanup.
type Opener func(t *testing.T) driver.Driver

// Run runs the whole conformance suite against the driver open returns.
func Run(t *testing.T, open func(t *testing.T) driver.Driver) {
	t.Run("Driver", func(t *testing.T) { runTests(t, open, driverTests) })
	t.Run("Engine", func(t *testing.T) { runTests(t, open, engineTests) })
}

type test struct {
	name string
	fn   func(t *testing.T, e *env)
}

func runTests(t *testing.T, open Opener, tests []test) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEnv(t, open))
		})
	}
}

// start is the fake clock's first instant. Whole seconds, so every time
// the suite computes survives a database that stores microseconds.
var start = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// clock is a fake clock: it stands still until Advance moves it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// env is one test's bundle: its own database, a fake clock and a context.
type env struct {
	t     *testing.T
	drv   driver.Driver
	clock *clock
	ctx   context.Context
	// effectsTable is the business table of the CompleteTx tests.
	effectsTable string
}

func newEnv(t *testing.T, open Opener) *env {
	drv := open(t)
	if drv == nil {
		t.Fatal("drivertest: open returned a nil driver")
	}
	return &env{t: t, drv: drv, clock: &clock{now: start}, ctx: t.Context()}
}

// db returns the handle for caller transactions, skipping the test when
// the driver has none.
func (e *env) db() *sql.DB {
	e.t.Helper()
	dber, ok := e.drv.(driver.DBer)
	if !ok {
		e.t.Skip("driver does not implement driver.DBer: no caller transactions")
	}
	return dber.DB()
}

// params returns insert parameters with the suite's defaults, changed by
// the given functions.
func (e *env) params(mod ...func(*driver.InsertParams)) driver.InsertParams {
	now := e.clock.Now()
	p := driver.InsertParams{
		Queue: "default", Type: "dt.task", Payload: []byte(`{"n":1}`), MaxAttempts: 3,
		RunAt: now, Timeout: time.Minute, Now: now,
	}
	for _, m := range mod {
		m(&p)
	}
	if p.PayloadDigest == "" {
		p.PayloadDigest = "digest:" + p.Type + ":" + string(p.Payload)
	}
	return p
}

// insert inserts one task with the suite's defaults and returns it.
func (e *env) insert(mod ...func(*driver.InsertParams)) *driver.TaskRow {
	e.t.Helper()
	res, err := e.drv.Insert(e.ctx, []driver.InsertParams{e.params(mod...)})
	if err != nil {
		e.t.Fatalf("insert: %v", err)
	}
	if len(res) != 1 || res[0].Task == nil {
		e.t.Fatalf("insert: got %d results, want 1 with a task", len(res))
	}
	if res[0].Duplicate {
		e.t.Fatalf("insert: unexpected duplicate of task %d", res[0].Task.ID)
	}
	return res[0].Task
}

// claim claims up to limit tasks of the default queue for owner at now.
func (e *env) claim(owner string, now time.Time, limit int) []driver.TaskRow {
	e.t.Helper()
	return e.claimQueue("default", owner, now, limit)
}

func (e *env) claimQueue(queue, owner string, now time.Time, limit int) []driver.TaskRow {
	e.t.Helper()
	rows, err := e.drv.Claim(e.ctx, driver.ClaimParams{
		Queue: queue, Limit: limit, Owner: owner, Now: now, LeaseExpiresAt: now.Add(leaseTTL),
	})
	if err != nil {
		e.t.Fatalf("claim: %v", err)
	}
	return rows
}

// claimOne claims exactly one task and fails the test otherwise.
func (e *env) claimOne(owner string, now time.Time) driver.TaskRow {
	e.t.Helper()
	rows := e.claim(owner, now, 1)
	if len(rows) != 1 {
		e.t.Fatalf("claim: got %d tasks, want 1", len(rows))
	}
	return rows[0]
}

// finish finishes transitions as owner at now and returns the applied ids.
func (e *env) finish(owner string, now time.Time, ts ...driver.Transition) []int64 {
	e.t.Helper()
	ids, err := e.drv.Finish(e.ctx, driver.FinishParams{Owner: owner, Now: now, Transitions: ts})
	if err != nil {
		e.t.Fatalf("finish: %v", err)
	}
	return ids
}

func (e *env) get(id int64) *driver.TaskRow {
	e.t.Helper()
	row, err := e.drv.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get task %d: %v", id, err)
	}
	return row
}

// all lists every task, newest first.
func (e *env) all() []driver.TaskRow {
	e.t.Helper()
	rows, err := e.drv.List(e.ctx, driver.Filter{Limit: 1000})
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	return rows
}

// total counts every task through Counts.
func (e *env) total() int64 {
	e.t.Helper()
	counts, err := e.drv.Counts(e.ctx)
	if err != nil {
		e.t.Fatalf("counts: %v", err)
	}
	var n int64
	for _, c := range counts {
		n += c.N
	}
	return n
}

// byState sums live counter rows by queue, type and state.
func byState(rows []driver.CountRow) []driver.QueueCount {
	var out []driver.QueueCount
	at := map[driver.QueueCount]int{}
	for _, r := range rows {
		st := driver.State(r.Kind)
		if r.Kind == driver.KindRetrying {
			st = driver.StatePending
		}
		k := driver.QueueCount{Queue: r.Queue, Type: r.Type, State: st}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, k)
		}
		out[i].Count += r.N
	}
	return out
}

// leaseTTL is the lease the suite's direct claims take.
const leaseTTL = 30 * time.Second

// waitFor polls cond until it holds, failing the test after 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitTask polls task id until cond holds and returns it.
func (e *env) waitTask(id int64, what string, cond func(r *driver.TaskRow) bool) *driver.TaskRow {
	e.t.Helper()
	var row *driver.TaskRow
	waitFor(e.t, fmt.Sprintf("task %d: %s", id, what), func() bool {
		row = e.get(id)
		return cond(row)
	})
	return row
}

// waitState waits until task id is in state s and no longer running.
func (e *env) waitState(id int64, s driver.State) *driver.TaskRow {
	e.t.Helper()
	return e.waitTask(id, "state "+string(s), func(r *driver.TaskRow) bool { return r.State == s })
}

// newClient returns a client on the test's driver with short, test-sized
// settings, the fake clock and logs routed to the test. Fields set in cfg
// win. Background services that would act on their own (heartbeat, rescue)
// run rarely unless the test asks for them.
func (e *env) newClient(cfg keel.Config) *keel.Client {
	e.t.Helper()
	if cfg.Driver == nil {
		cfg.Driver = e.drv
	}
	if cfg.Now == nil {
		cfg.Now = e.clock.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(e.output(), nil))
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&cfg.PollInterval, 10*time.Millisecond)
	def(&cfg.LeaseTTL, time.Hour)
	def(&cfg.HeartbeatInterval, 30*time.Minute)
	def(&cfg.RescueInterval, 30*time.Minute)
	def(&cfg.BackoffBase, time.Minute)
	def(&cfg.BackoffMax, time.Hour)
	def(&cfg.TimeoutGrace, time.Second)
	if cfg.BackoffJitter == 0 {
		cfg.BackoffJitter = -1
	}
	c, err := keel.NewClient(cfg)
	if err != nil {
		e.t.Fatalf("new client: %v", err)
	}
	return c
}

// testOutput writes to a test's output until the test's cleanup begins,
// and drops what comes after: a handler that ignores its context may log
// (a runaway) after its client stopped and its test ended, which the
// testing package reports as a race on the finished test's output.
type testOutput struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *testOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return len(p), nil
	}
	return w.t.Output().Write(p)
}

// output is the test's output for a client's logger (see testOutput).
// Its cleanup runs after those registered later, so a client's Stop
// still logs.
func (e *env) output() io.Writer {
	w := &testOutput{t: e.t}
	e.t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

// startClient starts c's workers and stops them when the test ends.
func (e *env) startClient(c *keel.Client) {
	e.t.Helper()
	if err := c.Start(e.ctx); err != nil {
		e.t.Fatalf("start: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			e.t.Errorf("stop: %v", err)
		}
	})
}

// stop stops c's workers now (Stop is idempotent, so the cleanup's second
// Stop does nothing).
func (e *env) stop(c *keel.Client) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		e.t.Fatalf("stop: %v", err)
	}
}

// jsonEqual reports whether a and b encode the same JSON value, so a
// database that normalises JSON (jsonb) passes.
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

func ids(rows []driver.TaskRow) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func sameIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[int64]int{}
	for _, id := range a {
		seen[id]++
	}
	for _, id := range b {
		seen[id]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// rescue does what the rescuer does at now: it lists up to limit expired
// leases, decides each task's fate with the engine's decision function
// (retry delay as given) and writes the decisions, fenced.
func (e *env) rescue(now time.Time, limit int, delay time.Duration) ([]driver.TaskRow, error) {
	expired, at, err := e.drv.ListExpired(e.ctx, driver.ExpiredParams{Now: now, Limit: limit})
	if err != nil || len(expired) == 0 {
		return nil, err
	}
	tasks := make([]driver.RescueTask, len(expired))
	for i := range expired {
		tasks[i] = driver.RescueTask{Owner: expired[i].LeaseOwner, Transition: engine.ExpiredTransition(&expired[i], at, delay)}
	}
	return e.drv.Rescue(e.ctx, driver.RescueParams{Now: at, Tasks: tasks})
}
