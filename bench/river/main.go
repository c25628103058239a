// Command river-bench runs River, a well-known Go task queue on
// PostgreSQL, with the client settings its own benchmark recommends
// (FetchCooldown 2ms, FetchPollInterval 20ms, 2,000 workers, inserts of
// 5,000 per call), so that keel bench can be compared with it on the same
// machine at the same time. Shared machines vary several-fold from day to
// day; the ratio of the two is what carries over.
//
//	go run . -n 100000                   drain N pre-inserted no-op jobs
//	go run . --duration 10s              continuous insert-and-work
//
// It lives in its own module so that keel itself does not depend on River.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

type noopArgs struct {
	Num int `json:"num"`
}

func (noopArgs) Kind() string { return "bench.noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// schemaName is what River accepts, checked before anything is dropped.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

const (
	insertBatch = 5000
	// backlog is the continuous mode's floor of available jobs, as in
	// River's own benchmark.
	backlog = 75000
)

func main() {
	n := flag.Int("n", 100000, "jobs to insert and drain")
	duration := flag.Duration("duration", 0, "run continuous insert-and-work for this long instead of draining")
	dsn := flag.String("dsn", "postgres://postgres@127.0.0.1:5432/test", "PostgreSQL DSN")
	schema := flag.String("schema", "river_bench", "schema to use; it is DROPPED and created anew")
	flag.Parse()
	if err := run(context.Background(), *dsn, *schema, *n, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn, schema string, n int, duration time.Duration) error {
	if n < 1 || duration < 0 {
		return errors.New("-n must be positive and --duration not negative")
	}
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("invalid schema name %q: use 1-40 lower-case letters, digits and '_', not starting with a digit", schema)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	ident := pgx.Identifier{schema}.Sanitize()
	for _, stmt := range []string{"DROP SCHEMA IF EXISTS " + ident + " CASCADE", "CREATE SCHEMA " + ident} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	drv := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(drv, &rivermigrate.Config{Schema: schema})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(drv, &river.Config{
		FetchCooldown: 2 * time.Millisecond, FetchPollInterval: 20 * time.Millisecond,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2000}},
		Schema:  schema,
		Workers: workers,
	})
	if err != nil {
		return err
	}
	// A buffer as large as the largest run, so no completion is dropped.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 1 << 20,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer cancel()
	var worked, lastAt atomic.Int64
	go func() {
		for range events {
			worked.Add(1)
			lastAt.Store(time.Now().UnixNano())
		}
	}()
	var inserted int64
	insert := func() error {
		batch := make([]river.InsertManyParams, insertBatch)
		for i := range batch {
			batch[i].Args = noopArgs{Num: int(inserted) + i}
		}
		_, err := client.InsertMany(ctx, batch)
		inserted += insertBatch
		return err
	}
	fmt.Printf("river-bench: River on PostgreSQL, schema %s (dropped and created anew), 2000 workers\n", schema)
	if duration == 0 {
		start := time.Now()
		for inserted < int64(n) {
			if err := insert(); err != nil {
				return err
			}
		}
		fmt.Printf("inserted %d jobs in %v\n", inserted, time.Since(start).Round(time.Millisecond))
		if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
			fmt.Fprintln(os.Stderr, "river-bench: no checkpoint before measuring:", err)
		}
		start = time.Now()
		if err := client.Start(ctx); err != nil {
			return err
		}
		for worked.Load() < inserted {
			time.Sleep(time.Millisecond)
		}
		el := time.Duration(lastAt.Load() - start.UnixNano())
		fmt.Printf("worked %d jobs in %v: %.0f jobs/s\n", worked.Load(), el.Round(time.Millisecond), float64(worked.Load())/el.Seconds())
		return client.Stop(ctx)
	}
	for inserted < backlog {
		if err := insert(); err != nil {
			return err
		}
	}
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		fmt.Fprintln(os.Stderr, "river-bench: no checkpoint before measuring:", err)
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	start, deadline := time.Now(), time.Now().Add(duration)
	for time.Now().Before(deadline) {
		if inserted-worked.Load() < backlog {
			if err := insert(); err != nil {
				return err
			}
			continue
		}
		time.Sleep(time.Millisecond)
	}
	w, el := worked.Load(), time.Since(start)
	fmt.Printf("inserted %d and worked %d jobs in %v: %.0f jobs/s\n", inserted, w, el.Round(time.Millisecond), float64(w)/el.Seconds())
	return client.Stop(ctx)
}
