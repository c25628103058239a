package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/keelq/keel"
)

// A worker process is told what to do through these variables; the
// runner sets them on the command its Options.Command returns.
const (
	EnvWorker = "KEEL_CHAOS_WORKER" // the kind of worker: "work" or "steps"
	envDSN    = "KEEL_CHAOS_DSN"
	envKind   = "KEEL_CHAOS_KIND" // sqlite, postgres, mariadb
	envSchema = "KEEL_CHAOS_SCHEMA"
	envNode   = "KEEL_CHAOS_NODE"
	envDelay  = "KEEL_CHAOS_DELAY"
	envTiming = "KEEL_CHAOS_TIMING" // Timing.env
	envTypes  = "KEEL_CHAOS_TYPES"  // typesEnv

)

// The task types of the scenarios.
const (
	workType  = "chaos.work"
	stepsType = "chaos.steps"
)

// The ledger of side effects: one row per task, written in the
// transaction that completes it (keel.CompleteTx), so a row exists exactly
// when the completion committed. stepsLedger has one row per execution of
// a durable step, written inside the step.
const (
	ledger      = "keel_chaos_ledger"
	stepsLedger = "keel_chaos_steps"
)

// ledgerDDL creates the ledger tables in sp; plain SQL every database
// takes.
func ledgerDDL(sp *space) []string {
	return []string{
		`CREATE TABLE ` + sp.table(ledger) + ` (task_id BIGINT NOT NULL, node VARCHAR(100) NOT NULL, attempt INT NOT NULL)`,
		`CREATE TABLE ` + sp.table(stepsLedger) + ` (task_id BIGINT NOT NULL, step VARCHAR(20) NOT NULL, attempt INT NOT NULL)`,
	}
}

// slotsPerWorker is how many tasks a worker process runs at once.
const slotsPerWorker = 8

type job struct {
	N int `json:"n"`
}

// IsWorker reports whether this process was started as a chaos worker.
func IsWorker() bool { return os.Getenv(EnvWorker) != "" }

// WorkerMain is the worker process: it opens the scenario's database,
// starts a keel client that works the scenario's tasks, prints "ready"
// and runs until it is killed. On SIGTERM it stops gracefully (keel's
// Client.Stop with the stop deadline it was given) and returns.
func WorkerMain() error {
	// A worker that outlives its runner (the runner died) ends itself.
	time.AfterFunc(10*time.Minute, func() { os.Exit(3) })
	ctx := context.Background()
	sp := &space{kind: os.Getenv(envKind), dsn: os.Getenv(envDSN), schema: os.Getenv(envSchema)}
	drv, db, err := sp.open(ctx, sp.dsn, 2*slotsPerWorker)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	node := os.Getenv(envNode)
	delay, err := time.ParseDuration(os.Getenv(envDelay))
	if err != nil {
		return fmt.Errorf("%s: %w", envDelay, err)
	}
	tm, err := parseTiming(os.Getenv(envTiming))
	if err != nil {
		return err
	}
	types, err := parseTypes(os.Getenv(envTypes))
	if err != nil {
		return err
	}
	h := keel.NewHandlers()
	queues := map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: slotsPerWorker}}
	switch kind := os.Getenv(EnvWorker); kind {
	case "work":
		keel.Handle(h, workType, workHandler(sp, db, node, delay))
		for _, t := range types {
			keel.Handle(h, t.Name, workHandler(sp, db, node, delay), t.options()...)
			queues[t.queue()] = keel.QueueConfig{MaxWorkers: slotsPerWorker}
		}
	case "steps":
		keel.Handle(h, stepsType, stepsHandler(sp, db))
	default:
		return fmt.Errorf("unknown worker kind %q", kind)
	}
	c, err := keel.NewClient(keel.Config{
		Driver: drv, Handlers: h, Node: node,
		Queues:   queues,
		LeaseTTL: tm.LeaseTTL, HeartbeatInterval: tm.HeartbeatInterval, RescueInterval: tm.RescueInterval,
		PollInterval: tm.PollInterval, BackoffBase: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		BackoffJitter: -1, MaxAttempts: 100, Timeout: max(30*time.Second, 2*delay), TimeoutGrace: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	fmt.Println("ready")
	<-term
	sctx, cancel := context.WithTimeout(ctx, tm.StopTimeout)
	defer cancel()
	return c.Stop(sctx)
}

// workHandler sleeps for delay (watching its context), then writes the
// task's ledger row and completes the task in one transaction: both
// commit or neither.
func workHandler(sp *space, db *sql.DB, node string, delay time.Duration) func(context.Context, *keel.Task[job]) error {
	insert := sp.rebind(`INSERT INTO ` + sp.table(ledger) + ` (task_id, node, attempt) VALUES (?, ?, ?)`)
	return func(ctx context.Context, task *keel.Task[job]) error {
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
	}
}

// stepsHandler runs three durable steps, each recording its execution in
// the steps ledger. On the task's first attempt step three then blocks
// until the process is killed. The result is ((n+1)*2)+1, built from the
// stored steps; the completion writes the ledger row as workHandler's does.
func stepsHandler(sp *space, db *sql.DB) func(context.Context, *keel.Task[job]) error {
	insert := sp.rebind(`INSERT INTO ` + sp.table(stepsLedger) + ` (task_id, step, attempt) VALUES (?, ?, ?)`)
	done := sp.rebind(`INSERT INTO ` + sp.table(ledger) + ` (task_id, node, attempt) VALUES (?, ?, ?)`)
	return func(ctx context.Context, task *keel.Task[job]) error {
		effect := func(step string) error {
			_, err := db.ExecContext(ctx, insert, task.ID, step, task.Attempt)
			return err
		}
		one, err := keel.Step(ctx, "one", func(ctx context.Context) (int, error) { return task.Args.N + 1, effect("one") })
		if err != nil {
			return err
		}
		two, err := keel.Step(ctx, "two", func(ctx context.Context) (int, error) { return one * 2, effect("two") })
		if err != nil {
			return err
		}
		three, err := keel.Step(ctx, "three", func(ctx context.Context) (int, error) {
			if err := effect("three"); err != nil {
				return 0, err
			}
			if task.Attempt == 1 {
				<-ctx.Done() // the runner kills the process here
				return 0, ctx.Err()
			}
			return two + 1, nil
		})
		if err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
		if _, err := tx.ExecContext(ctx, done, task.ID, strconv.Itoa(three), task.Attempt); err != nil {
			return err
		}
		if err := keel.CompleteTx(ctx, tx, three); err != nil {
			return err
		}
		return tx.Commit()
	}
}
