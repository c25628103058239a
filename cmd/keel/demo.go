package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
)

type demoOptions struct {
	dsn      string
	schema   string
	n        int
	db       string
	keep     bool
	workers  int
	seed     uint64
	deadline time.Duration
	verbose  bool
	// every is how often progress is printed; not a flag.
	every time.Duration
}

func newDemoCmd() *cobra.Command {
	o := demoOptions{every: 250 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a few hundred simulated tasks on an embedded SQLite database and show what keel does with them",
		Long: `demo enqueues a few hundred tasks of three types (email.send, report.build,
image.resize) on an embedded SQLite database and works them with short retry
delays, so it finishes in seconds. The handlers do a few milliseconds of
simulated work; some fail on purpose:

  - transient errors that succeed on retry, a RetryAfter, a timeout and a
    recovered panic, all retried with backoff;
  - a Snooze, which runs the task later without using an attempt;
  - every 50th task from the 8th on is a bounced email (keel.Permanent: dead at once),
    from the 24th an unsupported image format (also permanent), and from the
    42nd a poison report that panics on every attempt (dead when its
    attempts run out).

A few submissions are repeated with the same idempotency key to show that
they are deduplicated. Progress is printed every 250ms; the run ends with a
summary and checks that every task finished, that the dead letters are
exactly the planned ones and that no task was applied twice. It exits
non-zero if a check fails or tasks are still unfinished at --deadline.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
			defer stop()
			_, err := runDemo(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
			return err
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.n, "n", "n", 300, "number of distinct tasks to enqueue (1-100000)")
	f.StringVar(&o.db, "db", "", "SQLite file to use; it must hold no tasks yet and is kept (default: a new temporary file, removed afterwards)")
	f.StringVar(&o.dsn, "dsn", "", "PostgreSQL (postgres://...) or MySQL/MariaDB (mysql://...) DSN to run the demo on instead of SQLite")
	f.StringVar(&o.schema, "schema", "keel_demo", "with --dsn: the PostgreSQL schema or MySQL database to use; it is DROPPED and created anew")
	f.BoolVar(&o.keep, "keep", false, "keep the temporary database and print its path")
	f.IntVar(&o.workers, "workers", 20, "handlers running at once (1-1000)")
	f.Uint64Var(&o.seed, "seed", 0, "seed for the simulated failures (default: random, printed so a plan can be replayed)")
	f.DurationVar(&o.deadline, "deadline", 60*time.Second, "fail if tasks are still unfinished after this long")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "show keel's logs (every failed attempt) on stderr")
	return cmd
}

func (o demoOptions) validate() error {
	switch {
	case o.n < 1 || o.n > 100000:
		return fmt.Errorf("-n must be between 1 and 100000, got %d", o.n)
	case o.workers < 1 || o.workers > 1000:
		return fmt.Errorf("--workers must be between 1 and 1000, got %d", o.workers)
	case o.deadline <= 0:
		return fmt.Errorf("--deadline must be positive, got %v", o.deadline)
	case o.dsn != "" && (o.db != "" || o.keep):
		return errors.New("--dsn runs on PostgreSQL: --db and --keep are for SQLite")
	case o.keep && o.db != "":
		return errors.New("--keep applies to the temporary database only; a --db file is always kept")
	case o.every <= 0:
		return fmt.Errorf("progress interval must be positive, got %v", o.every)
	}
	return nil
}

// The demo's retry timing: short, so that four attempts finish in about a
// second instead of keel's production 30s × 2^n.
const (
	demoBackoffBase  = 100 * time.Millisecond
	demoBackoffMax   = time.Second
	demoImageTimeout = 300 * time.Millisecond
	demoRetryAfter   = 150 * time.Millisecond
	demoSnooze       = 200 * time.Millisecond
)

// demoRun is one demo: its plan, client and counters.
type demoRun struct {
	o      demoOptions
	out    io.Writer
	client *keel.Client
	plan   []*demoTask
	start  time.Time

	// Handler-side counters, by type.
	runs, snoozes, retryAfters map[string]*atomic.Int64
	// submitted counts Enqueue submissions, deduped those answered with an
	// existing task, conflicts the rejected reuses of a key.
	submitted, deduped, conflicts int
	dupes                         []string
}

// runDemo runs the demo and returns its report; the error is non-nil if a
// check failed or tasks were still unfinished at the deadline.
func runDemo(ctx context.Context, out, errOut io.Writer, o demoOptions) (*demoReport, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	// The workers' log and the progress lines may share one writer (a
	// terminal, a test's buffer): one lock orders their writes.
	var mu sync.Mutex
	out, errOut = &lockedWriter{mu: &mu, w: out}, &lockedWriter{mu: &mu, w: errOut}
	seed := o.seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	path, cleanup, err := demoPath(o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	var drv driver.Driver
	if o.dsn != "" {
		if drv, err = openFresh(ctx, o.dsn, o.schema); err != nil {
			return nil, err
		}
		path = serverName(o.dsn) + " " + o.schema
	} else if drv, err = sqlite.Open(ctx, path, sqlite.Options{}); err != nil {
		return nil, err
	}
	defer drv.Close()

	d := &demoRun{o: o, out: out, plan: demoPlan(o.n, seed),
		runs: demoCounters(), snoozes: demoCounters(), retryAfters: demoCounters()}
	// The report shows the planned failures and dead letters; the workers'
	// own records of them (a dead letter is logged at ERROR) only with
	// --verbose.
	level := slog.LevelError + 4
	if o.verbose {
		level = slog.LevelInfo
	}
	d.client, err = keel.NewClient(keel.Config{
		Driver:   drv,
		Handlers: d.handlers(),
		Queues:   map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: o.workers}},
		Logger:   slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: level})),
		// Retries and snoozes become due while the workers are busy or idle;
		// a short poll picks them up promptly.
		PollInterval: 50 * time.Millisecond,
		BackoffBase:  demoBackoffBase,
		BackoffMax:   demoBackoffMax,
	})
	if err != nil {
		return nil, err
	}
	if err := demoEmpty(ctx, d.client, path); err != nil {
		return nil, err
	}

	fmt.Fprintf(out, "keel demo: %d tasks on SQLite %s, %d workers, seed %d\n", o.n, path, o.workers, seed)
	fmt.Fprintf(out, "retry backoff %v doubling to at most %v, %d attempts; priorities: password resets 50, email 10, images 0, reports -5\n\n",
		demoBackoffBase, demoBackoffMax, 4)
	d.start = time.Now()
	if err := d.client.Start(ctx); err != nil {
		return nil, err
	}
	// The deadline covers the whole run; enqueueing itself is not cut short
	// by it, only by ctx.
	runCtx, cancel := context.WithTimeout(ctx, o.deadline)
	defer cancel()
	enqErr := d.enqueue(ctx)
	waitErr := error(nil)
	if enqErr == nil {
		waitErr = d.progress(runCtx)
	}
	stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelStop()
	if err := d.client.Stop(stopCtx); err != nil {
		return nil, fmt.Errorf("stop workers: %w", err)
	}
	elapsed := time.Since(d.start)
	if enqErr != nil {
		return nil, enqErr
	}

	rep, err := d.report(context.WithoutCancel(ctx), elapsed)
	if err != nil {
		return nil, err
	}
	rep.print(out)
	if o.keep {
		fmt.Fprintf(out, "\ndatabase kept at %s\n", path)
	}
	switch {
	case waitErr != nil && ctx.Err() != nil:
		return rep, fmt.Errorf("interrupted with %d tasks unfinished", rep.unfinished())
	case waitErr != nil:
		return rep, fmt.Errorf("stuck: %d tasks still pending or running after --deadline %v", rep.unfinished(), o.deadline)
	case len(rep.Problems) > 0:
		return rep, fmt.Errorf("%d check(s) failed", len(rep.Problems))
	}
	return rep, nil
}

// demoPath returns the database path and what removes it afterwards.
func demoPath(o demoOptions) (string, func(), error) {
	if o.db != "" {
		return o.db, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "keel-demo-")
	if err != nil {
		return "", nil, err
	}
	if o.keep {
		return filepath.Join(dir, "demo.db"), func() {}, nil
	}
	return filepath.Join(dir, "demo.db"), func() { os.RemoveAll(dir) }, nil
}

// demoEmpty refuses a database that already holds tasks: the summary and
// its checks count every task in it.
func demoEmpty(ctx context.Context, c *keel.Client, path string) error {
	counts, err := c.Counts(ctx)
	if err != nil {
		return err
	}
	var n int64
	for _, byState := range counts {
		for _, v := range byState {
			n += v
		}
	}
	if n > 0 {
		return fmt.Errorf("database %s already holds %d tasks; the demo needs a new file (omit --db for a temporary one)", path, n)
	}
	return nil
}

// enqueue submits the plan in batches, then repeats the idempotent
// submissions to show that they are deduplicated, and reuses one key with
// another payload to show the conflict.
func (d *demoRun) enqueue(ctx context.Context) error {
	const batch = 50
	var keyed []*demoTask
	for i := 0; i < len(d.plan); i += batch {
		jobs := make([]keel.TaskSpec, 0, batch)
		for _, t := range d.plan[i:min(i+batch, len(d.plan))] {
			jobs = append(jobs, keel.TaskSpec{Type: t.typ, Payload: t.payload, Options: t.opts})
			if t.idemKey != "" || t.uniqueBy != "" {
				keyed = append(keyed, t)
			}
		}
		infos, err := d.client.EnqueueMany(ctx, jobs)
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		for j, info := range infos {
			d.plan[i+j].id = info.ID
		}
		d.submitted += len(jobs)
	}
	for _, t := range keyed {
		info, err := d.client.Enqueue(ctx, t.typ, t.payload, t.opts...)
		if err != nil {
			return fmt.Errorf("resubmit %s #%d: %w", t.typ, t.id, err)
		}
		d.submitted++
		key := "UniqueBy(" + t.uniqueBy + ")"
		if t.idemKey != "" {
			key = "IdempotencyKey(" + t.idemKey + ")"
		}
		if info.Duplicate && info.ID == t.id {
			d.deduped++
			d.dupes = append(d.dupes, fmt.Sprintf("%s %s: resubmission returned task #%d (%s), nothing inserted", t.typ, key, info.ID, info.State))
		} else {
			d.dupes = append(d.dupes, fmt.Sprintf("%s %s: resubmission NOT deduplicated: got task #%d duplicate=%v", t.typ, key, info.ID, info.Duplicate))
		}
	}
	// Reusing an explicit key with another payload is a conflict.
	if i := slices.IndexFunc(keyed, func(t *demoTask) bool { return t.idemKey != "" }); i >= 0 {
		t := keyed[i]
		changed := t.payload.(emailArgs)
		changed.Template = "changed"
		d.submitted++
		_, err := d.client.Enqueue(ctx, t.typ, changed, t.opts...)
		switch {
		case errors.Is(err, keel.ErrIdempotencyConflict):
			d.conflicts++
			d.dupes = append(d.dupes, fmt.Sprintf("%s IdempotencyKey(%s) with another payload: rejected with ErrIdempotencyConflict", t.typ, t.idemKey))
		case err != nil:
			return fmt.Errorf("reuse key %s: %w", t.idemKey, err)
		default:
			d.dupes = append(d.dupes, fmt.Sprintf("%s IdempotencyKey(%s) with another payload: NOT rejected", t.typ, t.idemKey))
		}
	}
	return nil
}

// progress prints the counts every o.every until no task is pending or
// running, or ctx ends.
func (d *demoRun) progress(ctx context.Context) error {
	tick := time.NewTicker(d.o.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			d.printCounts(context.WithoutCancel(ctx))
			return ctx.Err()
		case <-tick.C:
		}
		c, err := d.printCounts(ctx)
		if err != nil {
			if ctx.Err() != nil {
				continue
			}
			return err
		}
		if c[keel.StatePending]+c[keel.StateRunning] == 0 {
			return nil
		}
	}
}

func (d *demoRun) printCounts(ctx context.Context) (map[keel.State]int64, error) {
	counts, err := d.client.Counts(ctx)
	if err != nil {
		return nil, err
	}
	c := map[keel.State]int64{}
	for _, byState := range counts {
		for s, n := range byState {
			c[s] += n
		}
	}
	fmt.Fprintf(d.out, "%6.2fs  pending %4d  running %3d  succeeded %4d  dead %3d\n",
		time.Since(d.start).Seconds(), c[keel.StatePending], c[keel.StateRunning], c[keel.StateSucceeded], c[keel.StateDead])
	return c, nil
}

// lockedWriter serialises writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
