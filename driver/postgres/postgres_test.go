package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/drivertest"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/testdb"
)

// pool is shared by every test; each test has its own schema.
var pool *pgxpool.Pool

func TestMain(m *testing.M) {
	cfg, err := pgxpool.ParseConfig(testdb.PostgresDSN())
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests:", testdb.EnvPostgres, err)
		os.Exit(1)
	}
	cfg.MaxConns = 40
	// The pool connects when first used: with no server, every test that
	// needs one skips (testdb.Require, through open).
	pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	pool.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// open returns a driver on a fresh schema (from internal/testdb, dropped
// when the test ends) unless opts names one.
func open(t *testing.T, opts postgres.Options) *postgres.Driver {
	t.Helper()
	if opts.Schema == "" {
		opts.Schema = testdb.PostgresSchema(t, "keel_test")
	}
	d, err := postgres.New(context.Background(), pool, opts)
	if err != nil {
		t.Fatalf("open schema %s: %v", opts.Schema, err)
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
	drivertest.Run(t, func(t *testing.T) driver.Driver { return open(t, postgres.Options{CallerClock: true}) })
}

// TestBrakeScenarios: the automatic brake's scenarios, apart from the
// suite (they time drains). Not parallel: it runs before the suite's
// parallel tests start, so that neither loads the other's timings.
func TestBrakeScenarios(t *testing.T) {
	drivertest.RunBrakeScenarios(t, func(t *testing.T) driver.Driver { return open(t, postgres.Options{CallerClock: true}) })
}

// TestEnqueueTxPgxAndSQL enqueues inside a pgx.Tx and a *sql.Tx: a rolled
// back transaction leaves no task, a committed one leaves exactly its tasks.
func TestEnqueueTxPgxAndSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t, postgres.Options{})
	c, err := keel.NewClient(keel.Config{Driver: d, Types: []string{"t"}})
	if err != nil {
		t.Fatal(err)
	}
	// pgx.Tx, rolled back.
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rolled, err := c.EnqueueTx(ctx, tx, "t", map[string]int{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, rolled.ID); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("rolled-back pgx enqueue: Get = %v, want ErrNotFound", err)
	}
	// pgx.Tx, committed, with a batch large enough for COPY.
	tx, err = d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]keel.TaskSpec, 20)
	for i := range jobs {
		jobs[i] = keel.TaskSpec{Type: "t", Payload: map[string]int{"n": i}}
	}
	jobs[7].Options = []keel.Option{keel.IdempotencyKey("seven")}
	infos, err := c.EnqueueManyTx(ctx, tx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, info := range infos {
		got, err := c.Get(ctx, info.ID)
		if err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		var p map[string]int
		if err := json.Unmarshal(got.Payload, &p); err != nil || p["n"] != i {
			t.Fatalf("job %d: stored payload %s, want n=%d", i, got.Payload, i)
		}
		if !got.RunAt.Equal(info.RunAt) || !got.CreatedAt.Equal(info.CreatedAt) {
			t.Fatalf("job %d: returned times %v/%v, stored %v/%v", i, info.RunAt, info.CreatedAt, got.RunAt, got.CreatedAt)
		}
	}
	// *sql.Tx on DB(), rolled back and committed.
	stx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := c.EnqueueTx(ctx, stx, "t", map[string]int{"n": 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := stx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, gone.ID); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("rolled-back sql enqueue: Get = %v, want ErrNotFound", err)
	}
	stx, err = d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := c.EnqueueTx(ctx, stx, "t", map[string]int{"n": 101})
	if err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, kept.ID); err != nil {
		t.Fatalf("committed sql enqueue: %v", err)
	}
	counts, err := c.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := counts[keel.DefaultQueue][keel.StatePending]; n != 21 {
		t.Fatalf("%d pending tasks, want 21", n)
	}
	// Another driver's transaction type is refused and writes nothing.
	if _, err := c.EnqueueTx(ctx, "not a tx", "t", nil); !errors.Is(err, driver.ErrUnsupportedTx) {
		t.Fatalf("bad tx: %v, want ErrUnsupportedTx", err)
	}
}

// TestDatabaseClock: without CallerClock, run times and leases come from
// the database clock even when the worker's clock is a day off.
func TestDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := open(t, postgres.Options{})
	skewed := func() time.Time { return time.Now().Add(-24 * time.Hour) }
	var dbNow time.Time
	if err := pool.QueryRow(ctx, `SELECT now()`).Scan(&dbNow); err != nil {
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
	// A claim with the skewed clock finds nothing due: due is judged by the
	// database, an hour from now.
	rows, err := d.Claim(ctx, driver.ClaimParams{Queue: keel.DefaultQueue, Limit: 10, Owner: "w", Now: skewed(),
		LeaseExpiresAt: skewed().Add(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Fatalf("claimed %d tasks an hour early", len(rows))
	}
	now := time.Now()
	if _, err := c.Enqueue(ctx, "t", nil); err != nil {
		t.Fatal(err)
	}
	rows, err = d.Claim(ctx, driver.ClaimParams{Queue: keel.DefaultQueue, Limit: 10, Owner: "w", Now: skewed(),
		LeaseExpiresAt: skewed().Add(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("claimed %d due tasks, want 1", len(rows))
	}
	if lease := rows[0].LeaseExpiresAt.Sub(now); lease < 20*time.Second || lease > 2*time.Minute {
		t.Fatalf("lease expires %v from now, want about 30s by the database clock", lease)
	}
}

// TestSequenceDatabaseClock: see drivertest.SequenceDatabaseClock.
func TestSequenceDatabaseClock(t *testing.T) {
	t.Parallel()
	drivertest.SequenceDatabaseClock(t, open(t, postgres.Options{}))
}

// TestLimitedClaimDatabaseClock: see drivertest.LimitedClaimDatabaseClock.
func TestLimitedClaimDatabaseClock(t *testing.T) {
	t.Parallel()
	drivertest.LimitedClaimDatabaseClock(t, open(t, postgres.Options{}))
}
