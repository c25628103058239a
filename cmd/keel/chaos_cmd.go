package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/internal/chaos"
	"github.com/keelq/keel/internal/chaos/lastrun"
)

type chaosOptions struct {
	dsn, db, schema string
	scenarios       []string
	workers         int
	duration        time.Duration
	json            bool
	config          string
}

func newChaosCmd() *cobra.Command {
	var o chaosOptions
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Crash keel's workers on purpose against your database and check that nothing was lost, applied twice or stuck",
		Long: `chaos runs crash scenarios against your database server: it starts worker
processes of its own (this binary), crashes them, and checks every task
against a ledger of side effects written in the transaction that completes
the task. A task is lost when it is missing, dead, or succeeded without its
effect; applied twice when it has more than one committed effect (fencing
allows a task to run again, never to commit twice); stuck when it has not
finished when the scenario's time (--duration) ran out.

It never touches existing work: each scenario makes a schema of its own in
the PostgreSQL database, a database of its own on the MariaDB/MySQL server,
or a SQLite file of its own next to --db (the file itself is never opened),
and drops it when the scenario ends. With --dsn it needs the right to create
and drop a schema or database.

Scenarios (each with 300 to 600 short tasks; a 2s lease, 0.5s heartbeats and
rescues and a 0.5s stop deadline, or those of --config):
  kill-worker    SIGKILL a worker in the middle of a batch: its tasks are rescued, and
                 keep their place in a line enqueued behind them; no other task runs twice
  stop-worker    SIGSTOP a worker past its lease, then SIGCONT: its late completions are fenced
  kill-leader    SIGKILL the leader: another takes over and rescues
  cut            cut every database connection for 4s through a local TCP proxy (not SQLite)
  sigterm        SIGTERM a worker mid-batch: it stops within its deadline and releases its tasks
  kill-in-step   SIGKILL a worker inside a durable step: done steps do not run again

It prints a table (or --json) with, per scenario, pass, fail or skip, the
counts, and the times it measured: rescue (from the fault to the last rescue
of a task the faulty worker held), takeover (a new leader), recovery (from
the end of the cut to the first task finished), stop (SIGTERM to exit). It
exits 1 when a scenario failed. The run's date and verdict are recorded in
keel_meta of the keel database the flags name (when it has keel's tables),
where keel doctor and GET /v1/system show them.

  keel chaos --db ./keel.db
  keel chaos --dsn postgres://keel@db/keel --scenario kill-worker --scenario cut
  keel chaos --dsn mysql://root@db:3306/keel --json
  keel chaos --db ./keel.db --config keel.toml      your engine timing and your types (slower)

With --config, the scenarios also run your [types]: their work becomes tasks
of each of your types in turn, on the type's queue, with its priority, its
timeout and its cluster limits (concurrency, rate, burst), worked by the
run's no-op handler in place of your handler or url. The run then checks
that no more of a type ran at once than its concurrency allows and that its
starts kept to its rate, and it works fewer tasks when your limits would not
let 600 drain in 30s. Retries stay the run's, so a kill never dead-letters a
task; ramps are not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runChaos(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.dsn, "dsn", "", "run against this database server: a postgres:// or mysql:// URL")
	fs.StringVar(&o.db, "db", "", "run against SQLite, in a file of its own next to this one")
	fs.StringVar(&o.schema, "schema", "keel", "with a postgres:// --dsn: the schema of keel's tables, where the run is recorded")
	fs.StringSliceVar(&o.scenarios, "scenario", []string{"all"}, "a scenario to run (repeat, or separate with commas), or all: "+strings.Join(chaos.Scenarios(), ", "))
	fs.IntVar(&o.workers, "workers", 3, "worker processes per scenario (1 to 16)")
	fs.DurationVar(&o.duration, "duration", 2*time.Minute, "bound of each scenario: a task not finished by then is stuck (20s to 1h)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.config, "config", "", "keel serve's configuration: its [engine] lease_ttl, heartbeat_interval, rescue_interval, poll_interval and its shutdown_timeout replace the run's short ones, and the work runs as its [types] with their queues, timeouts and limits")
	return cmd
}

// newChaosWorkerCmd is the worker process keel chaos starts: hidden, run
// only by keel chaos with its variables set.
func newChaosWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "chaos-worker",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if !chaos.IsWorker() {
				return errors.New("chaos-worker is started by keel chaos, not by hand")
			}
			return chaos.WorkerMain()
		},
	}
}

// chaosTarget checks the flags naming the database and returns its DSN.
func chaosTarget(o chaosOptions) (string, error) {
	switch {
	case o.dsn != "" && o.db != "":
		return "", errors.New("give --dsn or --db, not both")
	case o.dsn == "" && o.db == "":
		return "", errors.New("give --dsn (a postgres:// or mysql:// URL) or --db (a SQLite file)")
	case o.dsn != "":
		if !isPostgresDSN(o.dsn) && !isMySQLDSN(o.dsn) {
			return "", fmt.Errorf("--dsn must be a postgres:// or mysql:// URL, got %q; for SQLite use --db", o.dsn)
		}
		return o.dsn, nil
	}
	if isPostgresDSN(o.db) || isMySQLDSN(o.db) {
		return "", fmt.Errorf("--db is a SQLite file; for %s use --dsn", serverName(o.db))
	}
	dir := filepath.Dir(o.db)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("--db %s: its directory %s does not exist", o.db, dir)
	}
	return o.db, nil
}

func runChaos(ctx context.Context, out, errOut io.Writer, o chaosOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	dsn, err := chaosTarget(o)
	if err != nil {
		return err
	}
	if o.workers < 1 {
		return fmt.Errorf("--workers %d: want 1 to 16", o.workers)
	}
	if o.duration <= 0 {
		return fmt.Errorf("--duration %v: want 20s to 1h", o.duration)
	}
	var names []string
	for _, s := range o.scenarios {
		s = strings.TrimSpace(s)
		if s == "all" {
			names = append(names, chaos.Scenarios()...)
		} else if s != "" {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	timing := chaos.DefaultTiming
	var types []chaos.Type
	if o.config != "" {
		cfg, err := config.Load(config.Options{Path: o.config, Environ: os.Environ()})
		if err != nil {
			return err
		}
		e := cfg.Engine
		timing = chaos.Timing{LeaseTTL: time.Duration(e.LeaseTTL), HeartbeatInterval: time.Duration(e.HeartbeatInterval),
			RescueInterval: time.Duration(e.RescueInterval), PollInterval: time.Duration(e.PollInterval), StopTimeout: time.Duration(cfg.ShutdownTimeout)}
		types = chaosTypes(cfg)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary, to start workers from it: %w", err)
	}
	opts := chaos.Options{DSN: dsn, Scenarios: names, Workers: o.workers, Duration: o.duration, Timing: timing, Types: types,
		Command: func() *exec.Cmd { return exec.Command(exe, "chaos-worker") }}
	if err := opts.Validate(); err != nil {
		return chaosFlagError(err)
	}
	if !o.json {
		opts.Log = func(format string, args ...any) {
			if !strings.Contains(format, "stderr") {
				fmt.Fprintf(errOut, "chaos: "+format+"\n", args...)
			}
		}
	}
	// An interrupt ends the scenario that runs, which still drops its
	// database, and the run, which records nothing.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, opts)
	if err != nil {
		return fmt.Errorf("chaos: %w (everything it created was dropped)", err)
	}
	note := recordChaos(ctx, dsn, o.schema, rep)
	if o.json {
		if err := printJSON(out, rep); err != nil {
			return err
		}
	} else if err := printChaos(out, rep); err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(errOut, "chaos:", note)
	}
	if rep.Verdict != chaos.StatusPass {
		var failed []string
		for _, r := range rep.Results {
			if r.Status == chaos.StatusFail {
				failed = append(failed, r.Scenario)
			}
		}
		return fmt.Errorf("chaos: %d of %d scenarios failed: %s", len(failed), len(rep.Results), strings.Join(failed, ", "))
	}
	return nil
}

// chaosFlagError names the flag behind an Options error.
func chaosFlagError(err error) error {
	msg := err.Error()
	for _, f := range []string{"scenario", "workers", "duration"} {
		if strings.HasPrefix(msg, f) || strings.HasPrefix(msg, "unknown "+f) {
			return fmt.Errorf("--%s: %s", f, msg)
		}
	}
	return err
}

// printChaos writes the report as a table, then each scenario's failures,
// notes and reason, then the verdict.
func printChaos(w io.Writer, rep *chaos.Report) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "SCENARIO\tSTATUS\tTASKS\tSUCCEEDED\tLOST\tTWICE\tSTUCK\tRESCUED\tRESCUE\tTAKEOVER\tRECOVERY\tSTOP\tTIME")
	dur := func(d chaos.Duration) string {
		if d == 0 {
			return "-"
		}
		return time.Duration(d).Round(time.Millisecond).String()
	}
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Scenario, strings.ToUpper(r.Status),
			r.Tasks, r.Succeeded, r.Lost, r.Twice, r.Stuck, r.Rescued, dur(r.RescueTime), dur(r.TakeoverTime),
			dur(r.RecoveryTime), dur(r.StopTime), time.Duration(r.Elapsed).Round(100*time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.Reason != "" {
			fmt.Fprintf(w, "%s: skipped: %s\n", r.Scenario, r.Reason)
		}
		for _, f := range r.Failures {
			fmt.Fprintf(w, "%s: FAIL: %s\n", r.Scenario, f)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "%s: note: %s\n", r.Scenario, n)
		}
	}
	_, err := fmt.Fprintf(w, "%s on %s: %s in %v\n", "keel chaos", rep.Database, strings.ToUpper(rep.Verdict), time.Duration(rep.Elapsed).Round(100*time.Millisecond))
	return err
}

// recordChaos stores the run in keel_meta of the keel database dsn (and
// schema) names, when it has keel's tables; it returns a line saying
// where, or why not.
func recordChaos(ctx context.Context, dsn, schema string, rep *chaos.Report) string {
	if _, err := countMigrations(ctx, dsn, schema); err != nil {
		return "not recorded in keel_meta: " + err.Error()
	}
	drv, where, err := openStore(ctx, dsn, schema)
	if err != nil {
		return "not recorded in keel_meta: " + err.Error()
	}
	defer drv.Close()
	rec := lastrun.Record{At: time.Now().UTC(), Verdict: cmp.Or(rep.Verdict, lastrun.Fail), Database: rep.Database, Version: keelVersion()}
	for _, r := range rep.Results {
		rec.Scenarios = append(rec.Scenarios, r.Scenario)
		switch r.Status {
		case chaos.StatusFail:
			rec.Failed = append(rec.Failed, r.Scenario)
		case chaos.StatusSkip:
			rec.Skipped = append(rec.Skipped, r.Scenario)
		}
	}
	if err := lastrun.Save(ctx, drv, rec); err != nil {
		return "not recorded: " + err.Error()
	}
	return "recorded in keel_meta of " + where
}

// chaosTypes are keel.toml's [types] as the run's work types: their queue,
// priority, timeout and cluster limits (a ramp's concurrency is left out).
func chaosTypes(cfg *config.Config) []chaos.Type {
	var out []chaos.Type
	for _, name := range slices.Sorted(maps.Keys(cfg.Types)) {
		t := cfg.Types[name]
		ct := chaos.Type{Name: name, Queue: t.Queue, Priority: t.Priority, Timeout: t.Timeout.D(), Rate: t.Rate, Burst: t.Burst}
		if t.Ramp == nil {
			ct.Concurrency = t.Concurrency
		}
		out = append(out, ct)
	}
	return out
}
