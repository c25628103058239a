package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/drivertest"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open returns a driver on a fresh database, dropped when the test ends.
func open(t *testing.T, opts mysql.Options) *mysql.Driver {
	t.Helper()
	return openParams(t, opts, nil)
}

// openParams is open with DSN parameters (session variables) for the driver.
func openParams(t *testing.T, opts mysql.Options, params map[string]string) *mysql.Driver {
	t.Helper()
	name, dsn := testdb.MySQLDatabase(t, "keel_test")
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[k] = v
	}
	d, err := mysql.Open(context.Background(), cfg.FormatDSN(), opts)
	if err != nil {
		t.Fatalf("open database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

func TestConformance(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, func(t *testing.T) driver.Driver { return open(t, mysql.Options{CallerClock: true}) })
}

// TestBrakeScenarios: the automatic brake's scenarios, apart from the
// suite (they time drains). Not parallel: it runs before the suite's
// parallel tests start, so that neither loads the other's timings.
func TestBrakeScenarios(t *testing.T) {
	drivertest.RunBrakeScenarios(t, func(t *testing.T) driver.Driver { return open(t, mysql.Options{CallerClock: true}) })
}

// TestConcurrentClaims: 8 workers claim 20,000 tasks until none remain.
// No task is claimed twice, none is missed, and the lock conflicts the
// workers cause are retried inside the driver, never returned.
func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := open(t, mysql.Options{MaxConns: 12})
	const tasks, workers = 20000, 8
	now := time.Now().UTC()
	params := make([]driver.InsertParams, tasks)
	for i := range params {
		params[i] = driver.InsertParams{Queue: "default", Type: "t", Priority: i % 3, Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			MaxAttempts: 3, RunAt: now, Timeout: time.Minute, PayloadDigest: fmt.Sprint(i), Now: now}
	}
	for len(params) > 0 {
		n := min(len(params), 2000)
		if _, err := d.Insert(ctx, params[:n]); err != nil {
			t.Fatal(err)
		}
		params = params[n:]
	}
	var mu sync.Mutex
	claimed := map[int64]string{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for {
				now := time.Now()
				rows, err := d.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 20, Owner: owner, Now: now,
					LeaseExpiresAt: now.Add(time.Minute)})
				if err != nil {
					errs <- err
					return
				}
				if len(rows) == 0 {
					return
				}
				mu.Lock()
				for _, r := range rows {
					if prev, dup := claimed[r.ID]; dup {
						mu.Unlock()
						errs <- fmt.Errorf("task %d claimed by %s and %s", r.ID, prev, owner)
						return
					}
					claimed[r.ID] = owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(claimed) != tasks {
		t.Errorf("claimed %d distinct tasks, want %d", len(claimed), tasks)
	}
	counts, err := d.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range counts {
		if c.Kind != string(driver.StateRunning) || c.N != tasks {
			t.Errorf("count %+v, want %d running", c, tasks)
		}
	}
	t.Logf("%d lock conflicts retried", d.LockRetries())
}

// TestLockWaitRetried: a heartbeat that waits longer than
// innodb_lock_wait_timeout for a row another transaction holds gets error
// 1205; the driver retries it and succeeds once the lock is gone.
func TestLockWaitRetried(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := openParams(t, mysql.Options{CallerClock: true}, map[string]string{"innodb_lock_wait_timeout": "1"})
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := d.Insert(ctx, []driver.InsertParams{{Queue: "default", Type: "t", Payload: []byte(`{}`), MaxAttempts: 3,
		RunAt: now, Timeout: time.Minute, PayloadDigest: "d", Now: now}}); err != nil {
		t.Fatal(err)
	}
	rows, err := d.Claim(ctx, driver.ClaimParams{Queue: "default", Limit: 1, Owner: "w", Now: now, LeaseExpiresAt: now.Add(time.Minute)})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v, %d rows", err, len(rows))
	}
	tx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT id FROM keel_tasks WHERE id = ? FOR UPDATE`, rows[0].ID); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		released <- tx.Commit()
	}()
	held, err := d.Heartbeat(ctx, driver.HeartbeatParams{Owner: "w", IDs: []int64{rows[0].ID}, Now: now, LeaseExpiresAt: now.Add(2 * time.Minute)})
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if err != nil || len(held) != 1 {
		t.Fatalf("heartbeat: %v, held %v", err, held)
	}
	if d.LockRetries() < 1 {
		t.Fatalf("LockRetries = %d, want at least 1", d.LockRetries())
	}
	if got, err := d.Get(ctx, rows[0].ID); err != nil || !got.LeaseExpiresAt.Equal(now.Add(2*time.Minute)) {
		t.Fatalf("lease after heartbeat: %v, %v", got.LeaseExpiresAt, err)
	}
}

// TestDatabaseClock: without CallerClock, run times and leases come from
// the database clock even when the worker's clock is a day off.
func TestDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := open(t, mysql.Options{})
	skewed := func() time.Time { return time.Now().Add(-24 * time.Hour) }
	var dbNow time.Time
	if err := d.DB().QueryRowContext(ctx, `SELECT UTC_TIMESTAMP(6)`).Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	c, err := keel.NewClient(keel.Config{Driver: d, Types: []string{"t"}, Now: skewed})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Enqueue(ctx, "t", nil, keel.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if diff := info.CreatedAt.Sub(dbNow); diff < -time.Minute || diff > time.Minute {
		t.Fatalf("created_at %v is %v from the database clock %v", info.CreatedAt, diff, dbNow)
	}
	if diff := info.RunAt.Sub(info.CreatedAt); diff != time.Hour {
		t.Fatalf("run_at - created_at = %v, want the 1h delay", diff)
	}
	claim := func() []driver.TaskRow {
		t.Helper()
		rows, err := d.Claim(ctx, driver.ClaimParams{Queue: keel.DefaultQueue, Limit: 10, Owner: "w", Now: skewed(),
			LeaseExpiresAt: skewed().Add(30 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	// Due is judged by the database: the delayed task is an hour away.
	if rows := claim(); len(rows) != 0 {
		t.Fatalf("claimed %d tasks an hour early", len(rows))
	}
	now := time.Now()
	if _, err := c.Enqueue(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	rows := claim()
	if len(rows) != 1 {
		t.Fatalf("claimed %d due tasks, want 1", len(rows))
	}
	if lease := rows[0].LeaseExpiresAt.Sub(now); lease < 20*time.Second || lease > 2*time.Minute {
		t.Fatalf("lease expires %v from now, want about 30s by the database clock", lease)
	}
}

// TestDSNForms: a mysql:// URL is accepted, and a DSN must name a database.
func TestDSNForms(t *testing.T) {
	cfg, err := mysql.ParseDSN("mysql://root:pw@db.example:3307/keel?timeout=5s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "root" || cfg.Passwd != "pw" || cfg.Addr != "db.example:3307" || cfg.DBName != "keel" ||
		cfg.Timeout != 5*time.Second || !cfg.ParseTime || cfg.Loc != time.UTC || !cfg.ClientFoundRows ||
		!cfg.InterpolateParams {
		t.Fatalf("parsed %+v", cfg)
	}
	if cfg, err := mysql.ParseDSN("root@tcp(127.0.0.1:3306)/keel?interpolateParams=false"); err != nil || cfg.InterpolateParams {
		t.Fatalf("interpolateParams=false was not kept: %+v, %v", cfg, err)
	}
	if _, err := mysql.ParseDSN("root@tcp(127.0.0.1:3306)/"); err == nil {
		t.Fatal("a DSN without a database was accepted")
	}
}

// TestCountersDatabaseClock: without CallerClock, the live counters and
// history count the instants the database stored, not the caller's clock
// (a day off here): every write path leaves nothing for Reconcile to
// correct, and the history lands in the database's minute.
func TestCountersDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := open(t, mysql.Options{})
	skewed := time.Now().Add(-24 * time.Hour)
	check := func(step string) {
		t.Helper()
		fixed, err := d.Reconcile(ctx, driver.ReconcileParams{})
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if len(fixed) != 0 {
			t.Fatalf("%s: reconcile corrected %+v", step, fixed)
		}
	}
	ins := func(key string, delay time.Duration) {
		t.Helper()
		if _, err := d.Insert(ctx, []driver.InsertParams{{Queue: "q", Type: "t", Payload: []byte("{}"), MaxAttempts: 3,
			RunAt: skewed.Add(delay), Timeout: time.Minute, IdemKey: key, PayloadDigest: "x", Now: skewed}}); err != nil {
			t.Fatal(err)
		}
	}
	ins("", 0)
	ins("", 0)
	ins("k", 0)
	ins("k", 0) // a hit
	ins("", 90*time.Minute)
	ins("", time.Date(2045, 1, 1, 0, 0, 0, 0, time.UTC).Sub(skewed)) // past 2038
	check("insert")
	rows, err := d.Claim(ctx, driver.ClaimParams{Queue: "q", Limit: 3, Owner: "w", Now: skewed,
		LeaseExpiresAt: skewed.Add(time.Minute)})
	if err != nil || len(rows) != 3 {
		t.Fatalf("claimed %d, %v; want 3", len(rows), err)
	}
	check("claim")
	// A success, a retry 10 minutes later (caller's clock), and one whose
	// task the driver reads itself.
	ok, err := d.Finish(ctx, driver.FinishParams{Owner: "w", Now: skewed, Transitions: []driver.Transition{
		{ID: rows[0].ID, Fence: rows[0].Fence, State: driver.StateSucceeded, Task: &rows[0]},
		{ID: rows[1].ID, Fence: rows[1].Fence, State: driver.StatePending, RunAt: skewed.Add(10 * time.Minute),
			Error: &driver.AttemptError{Attempt: 1, Error: "boom"}, Task: &rows[1]},
		{ID: rows[2].ID, Fence: rows[2].Fence, State: driver.StateDead,
			Error: &driver.AttemptError{Attempt: 1, Error: "fatal"}},
	}})
	if err != nil || len(ok) != 3 {
		t.Fatalf("finished %v, %v; want 3", ok, err)
	}
	check("finish")
	if _, err := d.Cancel(ctx, rows[1].ID, skewed); err != nil {
		t.Fatal(err)
	}
	check("cancel")
	if _, err := d.Retry(ctx, rows[1].ID, skewed); err != nil {
		t.Fatal(err)
	}
	check("retry")
	if n, err := d.RetryMatching(ctx, driver.Filter{State: driver.StateDead, Limit: 10}, skewed); err != nil || n != 1 {
		t.Fatalf("retried %d, %v; want 1", n, err)
	}
	check("retry matching")
	hist, err := d.Minutes(ctx, time.Now().Add(-10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var sum driver.MinuteRow
	for _, m := range hist {
		sum.Add(m)
		if m.LastMS != 0 && (time.Since(time.UnixMilli(m.LastMS)) > 10*time.Minute || m.DurationMS < 0 || m.DurationMS > 60_000) {
			t.Errorf("history row %+v: not timed by the database clock", m)
		}
	}
	want := driver.MinuteRow{Enqueued: 5, Hits: 1, Attempts: 3, Ended: 3, Failed: 2, Succeeded: 1, Dead: 1, Cancelled: 1}
	sum.DurationMS, sum.FirstMS, sum.LastMS = 0, 0, 0 // checked per row above
	if sum != want {
		t.Fatalf("history of the last 10 minutes (database clock) sums to %+v, want %+v", sum, want)
	}
}

// TestSequenceDatabaseClock: see drivertest.SequenceDatabaseClock.
func TestSequenceDatabaseClock(t *testing.T) {
	t.Parallel()
	drivertest.SequenceDatabaseClock(t, open(t, mysql.Options{}))
}

// TestLimitedClaimDatabaseClock: see drivertest.LimitedClaimDatabaseClock.
func TestLimitedClaimDatabaseClock(t *testing.T) {
	t.Parallel()
	drivertest.LimitedClaimDatabaseClock(t, open(t, mysql.Options{}))
}

// TestKilledConnectionIsUnavailable: a connection the server killed
// (as a restart does) answers "invalid connection" or error 1927 in
// go-sql-driver; the driver's connections return it as
// driver.ErrUnavailable with the original still visible, so keel answers
// 503 rather than 500. An answer from the server stays as it is.
func TestKilledConnectionIsUnavailable(t *testing.T) {
	t.Parallel()
	d := open(t, mysql.Options{})
	ctx := t.Context()
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var id int64
	if err := conn.QueryRowContext(ctx, `SELECT CONNECTION_ID()`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DB().ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(ctx, `SELECT 1`)
	if !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("a statement on a killed connection: %v, want driver.ErrUnavailable", err)
	}
	if _, err := d.DB().ExecContext(ctx, `SELECT * FROM no_such_table`); err == nil || errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("a statement the server refused: %v, want its own error", err)
	}
}
