package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/keelq/keel"
	"github.com/keelq/keel/cmd/keel/internal/config"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/chaos/lastrun"
)

// The doctor's thresholds.
const (
	doctorSlowRoundTrip = 200 * time.Millisecond
	doctorSkewWarn      = time.Second
	doctorSkewFail      = 10 * time.Second
	// doctorLostAfter is three heartbeat intervals (keel.Config's default
	// HeartbeatInterval, 10s): a node silent that long is lost.
	doctorLostAfter = 30 * time.Second
	// doctorLeaseTTL is keel.Config's default LeaseTTL, for the server
	// mode's estimate of a running task's lease.
	doctorLeaseTTL    = 30 * time.Second
	doctorRescueSlack = time.Minute // the rescuer runs every 10s by default
	doctorOldReady    = 10 * time.Minute
	doctorDialTimeout = 2 * time.Second
	doctorFreeWarn    = 1 << 30
	doctorFreeFail    = 100 << 20
	doctorWALWarn     = 1 << 30
	// doctorPoolSample is how long apart the server mode reads keel
	// serve's connection pool twice, to see whether callers wait now.
	doctorPoolSample  = time.Second
	doctorPoolWarnPct = 80 // connections in use, of the pool's max
	doctorPoolWaitPct = 5  // time spent waiting, of the sample
)

// Statuses of a doctor check.
const (
	statusOK   = "ok"
	statusWarn = "warn"
	statusFail = "fail"
	statusSkip = "n/a"
)

// doctorOrder is the order of the lines, seed 000 §4.2's: the database
// first (nothing else can be read without it), then the symptom (stuck,
// waiting, paused), the input (what the dead letters say), the
// environment (schema version, clocks, processes), the resources
// (database connections, storage), and last the dependencies (the HTTP
// targets).
var doctorOrder = []string{"database", "stuck tasks", "oldest ready", "paused", "dead letters",
	"migrations", "clock skew", "nodes", "database connections", "connection pool", "storage", "chaos"}

// checkResult is one line of keel doctor.
type checkResult struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Hint   string `json:"hint,omitempty"`
}

type doctorOptions struct {
	api    apiFlags
	dsn    string
	db     string
	schema string
	config string
}

func newDoctorCmd() *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the system step by step and say what to do about each problem",
		Long: `doctor walks the troubleshooting order (the symptom, the input, the
environment, the resources, the dependencies) and prints one line per check:
ok, warn or fail, the figure, and what to do next. It exits non-zero when a
check fails; warnings alone exit 0.

Checks, in order: the database reachable and its round-trip time (without it
nothing else is checked); running tasks past their lease; the oldest ready
task (warn above 10m); paused queues and types; dead letters of the last hour
by type and error (warn above 3); migrations current; clock skew between this
machine and the database (warn above 1s, fail above 10s); nodes alive or lost
(no heartbeat for 30s, three heartbeat intervals); the database server's
connections against its max_connections; keel serve's own connection pool,
read twice 1s apart (warn at 80% in use or when callers wait for a
connection, fail when it is full and callers wait); on SQLite the free disk
space and the WAL size, on PostgreSQL and MySQL the task table's size and dead
rows; each HTTP target of --config reachable (TCP connect, 2s); the last keel
chaos run recorded (its date and verdict), or the keel chaos command to run.

It asks keel serve (--server, as the other commands) or, with --dsn or --db,
reads the database directly. Only the direct mode sees migrations, clock skew,
the database's connections, expired leases exactly and table sizes; only the
server mode sees a pool (a running process's). Opening a database applies pending
migrations, as every keel command does: doctor reports those it found pending.

  keel doctor                                  ask the server at KEEL_SERVER
  keel doctor --db ./keel.db --config keel.toml
  keel doctor --dsn postgres://keel@db/keel --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDoctor(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	addAPIFlags(cmd, &o.api)
	fs := cmd.Flags()
	fs.StringVar(&o.dsn, "dsn", "", "check this database directly: a postgres:// or mysql:// URL")
	fs.StringVar(&o.db, "db", "", "check this SQLite file directly")
	fs.StringVar(&o.schema, "schema", "keel", "with --dsn: the PostgreSQL schema of keel's tables")
	fs.StringVar(&o.config, "config", "", "keel serve's configuration, for its HTTP targets (skipped without it)")
	return cmd
}

func runDoctor(ctx context.Context, out io.Writer, o doctorOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.dsn != "" && o.db != "" {
		return errors.New("give --dsn or --db, not both")
	}
	var cfg *config.Config
	if o.config != "" {
		var err error
		if cfg, err = config.Load(config.Options{Path: o.config, Environ: os.Environ()}); err != nil {
			return err
		}
	}
	var results []checkResult
	if o.dsn != "" || o.db != "" {
		results = doctorDirect(ctx, cmp.Or(o.dsn, o.db), o.schema)
	} else {
		api, err := o.api.client()
		if err != nil {
			return err
		}
		results = doctorServer(ctx, api)
	}
	slices.SortStableFunc(results, func(a, b checkResult) int {
		return cmp.Compare(slices.Index(doctorOrder, a.Check), slices.Index(doctorOrder, b.Check))
	})
	if !failed(results) || len(results) > 1 { // the database is reachable
		results = append(results, targetChecks(ctx, cfg)...)
	}
	if err := printChecks(out, results, o.api.json); err != nil {
		return err
	}
	n := 0
	for _, r := range results {
		if r.Status == statusFail {
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("%d of %d checks failed", n, len(results))
	}
	return nil
}

func failed(rs []checkResult) bool {
	return slices.ContainsFunc(rs, func(r checkResult) bool { return r.Status == statusFail })
}

func printChecks(w io.Writer, rs []checkResult, asJSON bool) error {
	if asJSON {
		return printJSON(w, rs)
	}
	tw := newTable(w)
	for _, r := range rs {
		line := strings.ToUpper(r.Status) + "\t" + r.Check + "\t" + r.Detail
		if r.Hint != "" {
			line += "\t→ " + r.Hint
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// doctorDirect runs the checks on the database itself. It stops after
// the first check when the database cannot be reached or holds no keel
// tables, and writes nothing to a database that has none.
func doctorDirect(ctx context.Context, dsn, schema string) []checkResult {
	dbCheck := checkResult{Check: "database"}
	applied, err := countMigrations(ctx, dsn, schema)
	if err != nil {
		dbCheck.Status, dbCheck.Detail = statusFail, oneLine(err.Error(), 300)
		dbCheck.Hint = "check the DSN, that the database server runs and accepts this machine, and credentials"
		if errors.Is(err, errNoKeelTables) {
			dbCheck.Hint = "wrong database, schema or path? else create the tables with keel migrate"
		}
		return []checkResult{dbCheck}
	}
	drv, where, err := openStore(ctx, dsn, schema)
	if err != nil {
		dbCheck.Status, dbCheck.Detail = statusFail, oneLine(err.Error(), 300)
		return []checkResult{dbCheck}
	}
	defer drv.Close()
	c, err := keel.NewClient(keel.Config{Driver: drv})
	if err != nil {
		dbCheck.Status, dbCheck.Detail = statusFail, err.Error()
		return []checkResult{dbCheck}
	}
	start := time.Now()
	_, err = c.List(ctx, keel.Filter{Limit: 1})
	rtt := time.Since(start)
	rs := []checkResult{roundTrip(dbCheck, where, rtt, err)}
	if err != nil {
		return rs
	}
	rs = append(rs, migrationCheck(ctx, drv, applied), clockCheck(ctx, drv, dsn), connectionsCheck(ctx, drv, dsn),
		checkResult{Check: "connection pool", Status: statusSkip, Detail: "a pool belongs to a running process: keel doctor --server asks keel serve for its own"})
	nodes, err := c.Nodes(ctx)
	if err != nil {
		rs = append(rs, errCheck("nodes", err))
	} else {
		var ns []nodeFact
		for _, n := range nodes {
			ns = append(ns, nodeFact{n.Name, n.HeartbeatAt})
		}
		rs = append(rs, nodeCheck(ns))
	}
	rs = append(rs, expiredCheck(ctx, drv))
	if s, err := c.Stats(ctx); err != nil {
		rs = append(rs, errCheck("oldest ready", err))
	} else {
		var qs []readyFact
		for _, q := range s.Queues {
			qs = append(qs, readyFact{q.Name, q.OldestReadyAge, q.Served, q.Views[keel.ViewReady]})
		}
		rs = append(rs, readyCheck(qs))
	}
	if dead, err := c.List(ctx, keel.Filter{State: keel.StateDead, FinishedAfter: time.Now().Add(-time.Hour), Limit: 1000}); err != nil {
		rs = append(rs, errCheck("dead letters", err))
	} else {
		var ds []deadFact
		for _, t := range dead {
			ds = append(ds, deadFact{t.Type, lastError(t.Errors)})
		}
		rs = append(rs, deadCheck(ds))
	}
	var pq, pt []string
	qs, err := c.Queues(ctx)
	if err == nil {
		for _, q := range qs {
			if q.Paused {
				pq = append(pq, q.Name)
			}
		}
		var ts []keel.TypeInfo
		ts, err = c.Types(ctx)
		for _, t := range ts {
			if t.Paused {
				pt = append(pt, t.Name)
			}
		}
	}
	if err != nil {
		rs = append(rs, errCheck("paused", err))
	} else {
		rs = append(rs, pausedCheck(pq, pt))
	}
	rs = append(rs, storageCheck(ctx, drv, dsn, schema))
	rec, err := lastrun.Load(ctx, drv)
	return append(rs, chaosCheck(rec, err, chaosCommand(dsn, schema)))
}

// chaosCommand is the keel chaos command line for the database dsn (and
// schema, on PostgreSQL) names.
func chaosCommand(dsn, schema string) string {
	if !isPostgresDSN(dsn) && !isMySQLDSN(dsn) {
		return "keel chaos --db " + dsn
	}
	if u, err := url.Parse(dsn); err == nil {
		dsn = u.Redacted() // no password in a hint
	}
	cmd := "keel chaos --dsn " + dsn
	if isPostgresDSN(dsn) && schema != "keel" {
		cmd += " --schema " + schema
	}
	return cmd
}

// errNoKeelTables: the database answers but holds no keel tables.
var errNoKeelTables = errors.New("no keel tables")

// countMigrations connects on its own (so that nothing is created) and
// counts the schema versions applied.
func countMigrations(ctx context.Context, dsn, schema string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int
	switch {
	case isPostgresDSN(dsn):
		cfg, err := pgxpool.ParseConfig(dsn) // accepts the pool's own DSN parameters
		if err != nil {
			return 0, fmt.Errorf("--dsn: %w", err)
		}
		conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
		if err != nil {
			return 0, fmt.Errorf("connect to PostgreSQL: %w", err)
		}
		defer conn.Close(ctx)
		var table *string
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1)::text`, pgx.Identifier{schema, "keel_migrations"}.Sanitize()).Scan(&table); err != nil {
			return 0, fmt.Errorf("query PostgreSQL: %w", err)
		}
		if table == nil {
			return 0, fmt.Errorf("%w in PostgreSQL schema %s", errNoKeelTables, schema)
		}
		err = conn.QueryRow(ctx, `SELECT count(*) FROM `+*table).Scan(&n)
		return n, err
	case isMySQLDSN(dsn):
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return 0, err
		}
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return 0, err
		}
		defer db.Close()
		var tables int
		err = db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = 'keel_migrations'`).Scan(&tables)
		if err != nil {
			return 0, fmt.Errorf("connect to MySQL/MariaDB: %w", err)
		}
		if tables == 0 {
			return 0, fmt.Errorf("%w in MySQL database %s", errNoKeelTables, cfg.DBName)
		}
		err = db.QueryRowContext(ctx, `SELECT count(*) FROM keel_migrations`).Scan(&n)
		return n, err
	}
	if _, err := os.Stat(dsn); err != nil {
		return 0, fmt.Errorf("no SQLite database at %s: %w", dsn, errNoKeelTables)
	}
	db, err := sqlite.OpenDB(dsn, true)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM keel_migrations`).Scan(&n); err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return 0, fmt.Errorf("%w in SQLite file %s", errNoKeelTables, dsn)
		}
		return 0, fmt.Errorf("read SQLite file %s: %w", dsn, err)
	}
	return n, nil
}
