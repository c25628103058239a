package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/sqlite"
)

type benchOptions struct {
	n         int
	duration  time.Duration
	rate      int
	workers   int
	claim     int
	db        string
	dsn       string
	prefill   int
	producers int
	separate  bool
	schema    string
	sync      string
	batch     int
	inBatch   bool
	profiles  benchProfiles
	vacuum    bool
	settle    time.Duration
	compare   benchCompare
}

func newBenchCmd() *cobra.Command {
	var o benchOptions
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput and pickup latency with a no-op handler",
		Long: `bench measures keel on a SQLite file with a no-op handler.

  keel bench -n 100000                    insert N tasks, then work them down: jobs/s drained
  keel bench --duration 10s               insert and work at once for D: jobs/s sustained
  keel bench --duration 10s --rate 1000   insert R tasks a second: pickup latency p50/p95/p99
  keel bench -n 100000 --compare OTHER    7 pairs of runs of this build and OTHER: each pair's ratio, their median
  keel bench http                         keel serve's HTTP paths beside plain net/http (see bench http --help)

--compare runs this binary's bench and the other program's, each in a process of its
own on a new database, alternately first, with the same flags. The other program is
another keel binary, or River's bench/river (then only -n, --duration and --dsn, on
PostgreSQL). Which of the two it is, --compare-kind says, or by default its --help.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.compare.other != "" {
				return runBenchCompare(cmd.Context(), cmd.OutOrStdout(), o, cmd.Flags())
			}
			for _, name := range compareFlags[1:] {
				if cmd.Flags().Changed(name) {
					return fmt.Errorf("--%s needs --compare", name)
				}
			}
			return runBench(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	o.flags(cmd.Flags())
	cmd.AddCommand(newBenchHTTPCmd())
	return cmd
}

// flags registers the bench's flags on f.
func (o *benchOptions) flags(f *pflag.FlagSet) {
	f.IntVarP(&o.n, "n", "n", 100000, "tasks to insert and drain (drain mode)")
	f.DurationVar(&o.duration, "duration", 0, "run continuous insert-and-work for this long instead of draining")
	f.IntVar(&o.rate, "rate", 0, "with --duration: insert this many tasks a second and report pickup latency")
	f.IntVar(&o.workers, "workers", 1000, "concurrent handlers (the queue's MaxWorkers)")
	f.IntVar(&o.claim, "claim-batch", 500, "most tasks one claim takes (Config.ClaimBatch, 1..1000; the library's default is 100)")
	f.StringVar(&o.db, "db", "", "SQLite file (default: a new file in a temporary directory, removed afterwards)")
	f.StringVar(&o.dsn, "dsn", "", "PostgreSQL (postgres://...) or MySQL/MariaDB (mysql://...) DSN to bench instead of SQLite")
	f.StringVar(&o.schema, "schema", "keel_bench", "with --dsn: the PostgreSQL schema or MySQL database to use; it is DROPPED and created anew")
	f.BoolVar(&o.separate, "separate-producer", false, "with --rate: enqueue through a second, enqueue-only client, as another process would")
	f.IntVar(&o.producers, "producers", 4, "with --duration (no --rate): goroutines inserting at once")
	f.IntVar(&o.prefill, "prefill", 0, "work this many tasks down first (not measured), so the run starts on a table of succeeded rows")
	f.DurationVar(&o.settle, "settle", 3*time.Minute, "with --prefill on PostgreSQL: keep the prefill's client, and so its leader, running until the task table's dead rows are below the vacuum threshold (vacuumed by the leader or autovacuum), at most this long; 0: start measuring at once")
	f.BoolVar(&o.vacuum, "vacuum", false, "with --prefill on PostgreSQL: VACUUM (ANALYZE) the task table after the prefill; by default the bench does no maintenance of its own, only the client's leader does")
	f.StringVar(&o.sync, "sync", "FULL", "SQLite synchronous setting: FULL or NORMAL")
	f.IntVar(&o.batch, "insert-batch", 1000, "tasks per EnqueueMany when inserting")
	f.BoolVar(&o.inBatch, "batch", false, "drain mode: insert the tasks as the members of one batch (opened, filled --insert-batch at a time, sealed) with an on_finish callback; reports when the callback ran")
	o.profiles.flags(f, "the run")
	o.compare.flags(f)
}

func (o benchOptions) validate() error {
	switch {
	case o.n < 1:
		return fmt.Errorf("-n must be positive, got %d", o.n)
	case o.duration < 0:
		return fmt.Errorf("--duration must not be negative, got %v", o.duration)
	case o.rate < 0:
		return fmt.Errorf("--rate must not be negative, got %d", o.rate)
	case o.rate > 0 && o.duration == 0:
		return errors.New("--rate needs --duration")
	case o.workers < 1:
		return fmt.Errorf("--workers must be positive, got %d", o.workers)
	case o.claim < 1 || o.claim > 1000:
		return fmt.Errorf("--claim-batch must be in 1..1000, got %d", o.claim)
	case o.dsn != "" && o.db != "":
		return errors.New("--db and --dsn are exclusive")
	case o.producers < 1:
		return fmt.Errorf("--producers must be positive, got %d", o.producers)
	case o.prefill < 0:
		return fmt.Errorf("--prefill must not be negative, got %d", o.prefill)
	case o.batch < 1:
		return fmt.Errorf("--insert-batch must be positive, got %d", o.batch)
	case o.settle < 0:
		return fmt.Errorf("--settle must not be negative, got %v", o.settle)
	case o.inBatch && o.duration > 0:
		return errors.New("--batch drains: it takes -n, not --duration")
	case o.vacuum && o.prefill == 0:
		return errors.New("--vacuum needs --prefill")
	case o.vacuum && !isPostgresDSN(o.dsn):
		return errors.New("--vacuum needs a PostgreSQL --dsn")
	}
	return nil
}

// workerConfig is the configuration of a client that works the bench's
// tasks with the bench's settings.
func (o benchOptions) workerConfig(drv driver.Driver, h *keel.Handlers) keel.Config {
	return keel.Config{
		Driver: drv, Handlers: h,
		Queues:     map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: o.workers}},
		ClaimBatch: o.claim,
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

// benchRun is one bench's database, client and counters.
type benchRun struct {
	client  *keel.Client
	drv     driver.Driver
	worked  atomic.Int64
	target  int64
	reached chan struct{}
	once    sync.Once
	// finished is closed when the batch's on_finish callback ran (--batch).
	finished chan batch.Event

	mu      sync.Mutex
	pickups []time.Duration
	// commits are the measured outcomes' times from the handler's return
	// to the commit (keel_outcome_commit_seconds), from startMeasuring on.
	measuring atomic.Bool
	commits   []time.Duration
	// profile starts the profiles when the measured phase begins.
	profile          func() error
	warnedCheckpoint bool
}

// startMeasuring runs right before the measured phase: it settles the
// database (a PostgreSQL checkpoint, when allowed, so that one forced by
// the set-up's WAL does not land in the figures) and starts the profile.
func (b *benchRun) startMeasuring(ctx context.Context) error {
	defer b.measuring.Store(true)
	if cp, ok := b.drv.(interface{ Checkpoint(context.Context) error }); ok {
		if err := cp.Checkpoint(ctx); err != nil && !b.warnedCheckpoint {
			b.warnedCheckpoint = true
			fmt.Fprintf(os.Stderr, "keel bench: no checkpoint before measuring (%v); figures may include one\n", err)
		}
	}
	if b.profile == nil {
		return nil
	}
	return b.profile()
}

func runBench(ctx context.Context, out io.Writer, o benchOptions) (err error) {
	if err := o.validate(); err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	path := o.db
	if path == "" && o.dsn == "" {
		dir, err := os.MkdirTemp("", "keel-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "bench.db")
	}
	var drv driver.Driver
	var where string
	if o.dsn != "" {
		fresh, err := openFresh(ctx, o.dsn, o.schema)
		if err != nil {
			return err
		}
		drv, where = fresh, fmt.Sprintf("%s, schema/database %s (dropped and created anew)", serverName(o.dsn), o.schema)
	} else {
		lite, err := sqlite.Open(ctx, path, sqlite.Options{Synchronous: sqlite.Synchronous(o.sync)})
		if err != nil {
			return err
		}
		drv, where = lite, fmt.Sprintf("SQLite %s (synchronous=%s)", path, o.sync)
	}
	defer drv.Close()
	b := &benchRun{drv: drv, reached: make(chan struct{})}
	h := keel.NewHandlers()
	keel.Handle(h, "bench.noop", func(ctx context.Context, t *keel.Task[struct{}]) error {
		if o.rate > 0 {
			d := time.Since(t.CreatedAt)
			b.mu.Lock()
			b.pickups = append(b.pickups, d)
			b.mu.Unlock()
		}
		if b.worked.Add(1) == b.target {
			b.once.Do(func() { close(b.reached) })
		}
		return nil
	})
	b.finished = make(chan batch.Event, 1)
	keel.Handle(h, "bench.batch_done", func(ctx context.Context, t *keel.Task[batch.Event]) error {
		select {
		case b.finished <- t.Args:
		default:
		}
		return nil
	})
	b.client, err = keel.NewClient(o.workerConfig(drv, h))
	if err != nil {
		return err
	}
	b.profile = o.profiles.start
	defer func() { // written when the run ends; a failed run's profile is best effort
		if perr := o.profiles.stop(); err == nil {
			err = perr
		}
	}()
	fmt.Fprintf(out, "keel bench: %s, %d workers, claims of up to %d\n", where, o.workers, o.claim)
	if o.prefill > 0 {
		if err := b.prefillSucceeded(ctx, out, o, h); err != nil {
			return err
		}
	}
	b.client.Observe(b)
	switch {
	case o.duration == 0:
		err = b.drain(ctx, out, o)
	case o.rate == 0:
		err = b.continuous(ctx, out, o)
	default:
		err = b.latency(ctx, out, o)
	}
	if err != nil {
		return err
	}
	return b.reportCommits(out)
}

// Observe implements keel.Observer: it keeps the commit latency of every
// outcome stored while measuring.
func (b *benchRun) Observe(ev keel.Event) {
	if ev.Kind != keel.EventAttempt || !b.measuring.Load() {
		return
	}
	b.mu.Lock()
	b.commits = append(b.commits, ev.CommitLatency)
	b.mu.Unlock()
}

// reportCommits prints the percentiles of the time from a handler's return
// to its outcome committed: the window in which a crash runs a finished
// task again.
func (b *benchRun) reportCommits(out io.Writer) error {
	b.mu.Lock()
	p := slices.Clone(b.commits)
	b.mu.Unlock()
	if len(p) == 0 {
		return nil
	}
	slices.Sort(p)
	q := func(f float64) time.Duration { return p[min(len(p)-1, int(f*float64(len(p))))].Round(time.Microsecond) }
	fmt.Fprintf(out, "outcome commit (handler return to committed, keel_outcome_commit_seconds) of %d tasks: p50 %v p95 %v p99 %v max %v\n",
		len(p), q(0.50), q(0.95), q(0.99), p[len(p)-1].Round(time.Microsecond))
	return nil
}

func (b *benchRun) insert(ctx context.Context, n, batch int) error {
	return b.insertWith(ctx, b.client, n, batch)
}

func (b *benchRun) insertWith(ctx context.Context, c *keel.Client, n, batch int) error {
	jobs := make([]keel.TaskSpec, 0, batch)
	for n > 0 {
		jobs = jobs[:0]
		for range min(n, batch) {
			jobs = append(jobs, keel.TaskSpec{Type: "bench.noop", Payload: struct{}{}})
		}
		if _, err := c.EnqueueMany(ctx, jobs); err != nil {
			return err
		}
		n -= len(jobs)
	}
	return nil
}

// insertBatch inserts n tasks as the members of one batch: it opens the
// batch, adds size tasks at a time and seals it with the last ones.
func (b *benchRun) insertBatch(ctx context.Context, n, size int) error {
	bt, _, err := batch.Enqueue(ctx, b.client, batch.Spec{Open: true, OnFinish: &keel.TaskSpec{Type: "bench.batch_done"}})
	if err != nil {
		return err
	}
	jobs := make([]keel.TaskSpec, 0, size)
	for n > 0 {
		jobs = jobs[:0]
		for range min(n, size) {
			jobs = append(jobs, keel.TaskSpec{Type: "bench.noop", Payload: struct{}{}})
		}
		n -= len(jobs)
		if _, err := batch.Add(ctx, b.client, bt.ID, jobs, n == 0); err != nil {
			return err
		}
	}
	return nil
}

// prefillSucceeded works n tasks down with a client of its own before the
// measured run, so the run starts on a table holding n succeeded rows.
func (b *benchRun) prefillSucceeded(ctx context.Context, out io.Writer, o benchOptions, h *keel.Handlers) error {
	start := time.Now()
	pre, err := keel.NewClient(o.workerConfig(b.drv, h))
	if err != nil {
		return err
	}
	b.target = int64(o.prefill)
	if err := b.insertWith(ctx, pre, o.prefill, o.batch); err != nil {
		return err
	}
	if err := pre.Start(ctx); err != nil {
		return err
	}
	<-b.reached
	took := time.Since(start)
	settled, err := b.settle(ctx, o.settle)
	if err != nil {
		return err
	}
	if err := pre.Stop(ctx); err != nil {
		return err
	}
	b.worked.Store(0)
	b.reached, b.once = make(chan struct{}), sync.Once{}
	// By default the measured phase starts on the table as the prefill
	// left it: whatever maintenance it needs is the leader's (or
	// autovacuum's) to do, as in a deployment. --vacuum does it here.
	vacuumed := ""
	if o.vacuum {
		v, ok := b.drv.(interface{ Vacuum(context.Context) error })
		if !ok {
			return errors.New("--vacuum: the driver has no Vacuum")
		}
		if err := v.Vacuum(ctx); err != nil {
			return err
		}
		vacuumed = ", then vacuumed (--vacuum)"
	}
	fmt.Fprintf(out, "prefilled %d succeeded tasks in %v%s%s (not measured)\n", o.prefill, took.Round(time.Millisecond), settled, vacuumed)
	return nil
}

// settle waits, at most d, until the task table's dead rows are below the
// threshold from which it needs a vacuum: the bench does no maintenance,
// but a table that has held its finished rows for a while has been
// maintained by the leader or autovacuum, and the prefill made them all in
// the last minutes. It reports what it found, for the prefill's line.
func (b *benchRun) settle(ctx context.Context, d time.Duration) (string, error) {
	c, ok := b.drv.(interface {
		CheckMaintenance(context.Context) (driver.MaintainReport, error)
	})
	if !ok || d == 0 {
		return "", nil
	}
	start := time.Now()
	for {
		r, err := c.CheckMaintenance(ctx)
		if err != nil {
			return "", err
		}
		who := "the leader; autovacuum off"
		if r.Autovacuum {
			who = "autovacuum; on"
		}
		waited := time.Since(start).Round(time.Second)
		if r.DeadRows < r.Threshold {
			return fmt.Sprintf(", settled in %v (%d dead rows, below %d; vacuums by %s)", waited, r.DeadRows, r.Threshold, who), nil
		}
		if time.Since(start) >= d {
			return fmt.Sprintf(", not settled in %v (%d dead rows, threshold %d; vacuums by %s)", waited, r.DeadRows, r.Threshold, who), nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (b *benchRun) drain(ctx context.Context, out io.Writer, o benchOptions) error {
	start := time.Now()
	insert := b.insert
	if o.inBatch {
		insert = b.insertBatch
	}
	if err := insert(ctx, o.n, o.batch); err != nil {
		return err
	}
	ins := time.Since(start)
	fmt.Fprintf(out, "inserted %d tasks in %v (%.0f tasks/s)\n", o.n, ins.Round(time.Millisecond), float64(o.n)/ins.Seconds())
	b.target = int64(o.n)
	if err := b.startMeasuring(ctx); err != nil {
		return err
	}
	start = time.Now()
	if err := b.client.Start(ctx); err != nil {
		return err
	}
	<-b.reached
	el := time.Since(start)
	if o.inBatch {
		ev := <-b.finished
		fmt.Fprintf(out, "batch %d finished: its on_finish ran %v after the drain began (%d of %d members succeeded)\n",
			ev.BatchID, time.Since(start).Round(time.Millisecond), ev.Succeeded, ev.Total)
	}
	if err := b.client.Stop(ctx); err != nil {
		return err
	}
	counts, err := b.client.Counts(ctx)
	if err != nil {
		return err
	}
	done := counts[keel.DefaultQueue][keel.StateSucceeded] - int64(o.prefill)
	if o.inBatch {
		done-- // the batch's on_finish
	}
	fmt.Fprintf(out, "worked %d tasks in %v: %.0f jobs/s (succeeded in database: %d)\n",
		b.worked.Load(), el.Round(time.Millisecond), float64(b.worked.Load())/el.Seconds(), done)
	if done != int64(o.n) {
		return fmt.Errorf("expected %d succeeded tasks, found %d", o.n, done)
	}
	return nil
}

func (b *benchRun) continuous(ctx context.Context, out io.Writer, o benchOptions) error {
	b.target = -1
	if err := b.startMeasuring(ctx); err != nil {
		return err
	}
	if err := b.client.Start(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(o.duration)
	var inserted atomic.Int64
	start := time.Now()
	// Several producers, as an application has many request handlers; the
	// backlog stays bounded so the figure is a sustained rate.
	errs := make(chan error, o.producers)
	for range o.producers {
		go func() {
			for time.Now().Before(deadline) {
				if inserted.Load()-b.worked.Load() > int64(4*o.batch*o.producers) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err := b.insert(ctx, o.batch, o.batch); err != nil {
					errs <- err
					return
				}
				inserted.Add(int64(o.batch))
			}
			errs <- nil
		}()
	}
	var firstErr error
	for range o.producers {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return firstErr
	}
	worked := b.worked.Load()
	el := time.Since(start)
	if err := b.client.Stop(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "inserted %d and worked %d tasks in %v: %.0f jobs/s\n", inserted.Load(), worked, el.Round(time.Millisecond), float64(worked)/el.Seconds())
	return nil
}

func (b *benchRun) latency(ctx context.Context, out io.Writer, o benchOptions) error {
	b.target = -1
	if err := b.startMeasuring(ctx); err != nil {
		return err
	}
	if err := b.client.Start(ctx); err != nil {
		return err
	}
	producer := b.client
	if o.separate {
		// An enqueue-only client: its enqueues cannot wake the workers
		// directly, as if another process made them; the workers learn of
		// them from the driver's notifications or their poll.
		var err error
		if producer, err = keel.NewClient(keel.Config{Driver: b.drv, Types: []string{"bench.noop"}}); err != nil {
			return err
		}
	}
	interval := time.Second / time.Duration(o.rate)
	total := int(o.duration / interval)
	next := time.Now()
	for i := 0; i < total; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		if _, err := producer.Enqueue(ctx, "bench.noop", struct{}{}); err != nil {
			return err
		}
	}
	wait := time.Now().Add(10 * time.Second)
	for b.worked.Load() < int64(total) && time.Now().Before(wait) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := b.client.Stop(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	p := slices.Clone(b.pickups)
	b.mu.Unlock()
	slices.Sort(p)
	if len(p) == 0 {
		return errors.New("no task was picked up")
	}
	q := func(f float64) time.Duration { return p[min(len(p)-1, int(f*float64(len(p))))] }
	fmt.Fprintf(out, "enqueued %d tasks at %d/s, worked %d; pickup latency p50 %v p95 %v p99 %v max %v\n",
		total, o.rate, len(p), q(0.50).Round(time.Microsecond), q(0.95).Round(time.Microsecond),
		q(0.99).Round(time.Microsecond), p[len(p)-1].Round(time.Microsecond))
	return nil
}
