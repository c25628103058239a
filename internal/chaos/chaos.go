package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// Options are one run's settings.
type Options struct {
	// DSN names the database the run works beside: a postgres:// URL (a
	// schema of its own is made in that database), a mysql:// URL or
	// go-sql-driver DSN (a database of its own on that server), else a
	// SQLite file path (a file of its own in the same directory; the file
	// itself is never opened). Required.
	DSN string
	// Scenarios are the scenarios to run, by name (see Scenarios). Default
	// all of them.
	Scenarios []string
	// Workers is how many worker processes a scenario starts. Default 3.
	Workers int
	// Duration bounds each scenario: a task not finished by then counts as
	// stuck. Default 2m.
	Duration time.Duration
	// Command returns a new command that runs WorkerMain (keel's own
	// binary in its hidden worker mode, or a test binary). The runner adds
	// the variables that tell the worker what to do. Required.
	Command func() *exec.Cmd
	// Log receives a line per step of the run; nil logs nothing.
	Log func(format string, args ...any)
	// Timing is the workers' lease, heartbeat, rescue and stop settings,
	// and what the scenarios' bounds are computed from. Default
	// DefaultTiming: short, so that a run takes seconds.
	Timing Timing
	// Types are the user's task types the scenarios run their work as
	// (see Type); none: the run's own type.
	Types []Type

	// unlimited leaves the types' limits unstored, so the limits check
	// has something to catch (the package's tests).
	unlimited bool
}

// Timing is the workers' engine settings that decide how soon a fault is
// repaired (keel.Config's fields of the same names).
type Timing struct {
	LeaseTTL          time.Duration
	HeartbeatInterval time.Duration
	RescueInterval    time.Duration
	PollInterval      time.Duration
	// StopTimeout is the deadline the SIGTERM scenario's worker gives
	// keel's Client.Stop (keel serve's shutdown_timeout).
	StopTimeout time.Duration
}

// DefaultTiming is the timing of a run without Options.Timing: a 2s
// lease, so that rescues happen within seconds.
var DefaultTiming = Timing{LeaseTTL: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
	RescueInterval: 500 * time.Millisecond, PollInterval: 100 * time.Millisecond, StopTimeout: 500 * time.Millisecond}

func (t Timing) validate() error {
	if t.LeaseTTL <= 0 || t.HeartbeatInterval <= 0 || t.RescueInterval <= 0 || t.PollInterval <= 0 || t.StopTimeout <= 0 {
		return fmt.Errorf("timing %+v: every setting must be positive", t)
	}
	if t.HeartbeatInterval >= t.LeaseTTL {
		return fmt.Errorf("timing: heartbeat interval %v must be shorter than the lease %v", t.HeartbeatInterval, t.LeaseTTL)
	}
	return nil
}

// env is t as the worker process's variable.
func (t Timing) env() string {
	return fmt.Sprintf("%s,%s,%s,%s,%s", t.LeaseTTL, t.HeartbeatInterval, t.RescueInterval, t.PollInterval, t.StopTimeout)
}

// parseTiming reads what env wrote.
func parseTiming(s string) (Timing, error) {
	f := strings.Split(s, ",")
	if len(f) != 5 {
		return Timing{}, fmt.Errorf("timing %q: want 5 durations", s)
	}
	var d [5]time.Duration
	for i := range f {
		v, err := time.ParseDuration(f[i])
		if err != nil {
			return Timing{}, fmt.Errorf("timing %q: %w", s, err)
		}
		d[i] = v
	}
	return Timing{d[0], d[1], d[2], d[3], d[4]}, nil
}

func (o Options) withDefaults() Options {
	if len(o.Scenarios) == 0 {
		o.Scenarios = Scenarios()
	}
	if o.Workers == 0 {
		o.Workers = 3
	}
	if o.Duration == 0 {
		o.Duration = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Timing == (Timing{}) {
		o.Timing = DefaultTiming
	}
	return o
}

// Validate reports the first bad setting, naming it.
func (o Options) Validate() error {
	o = o.withDefaults()
	if o.DSN == "" {
		return errors.New("no database: give a DSN or a SQLite file")
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(Scenarios(), s) {
			return fmt.Errorf("unknown scenario %q (known: %s, or all)", s, strings.Join(Scenarios(), ", "))
		}
	}
	if o.Workers < 1 || o.Workers > 16 {
		return fmt.Errorf("workers %d: want 1 to 16", o.Workers)
	}
	if o.Duration < 20*time.Second || o.Duration > time.Hour {
		return fmt.Errorf("duration %v: want 20s to 1h", o.Duration)
	}
	if o.Command == nil {
		return errors.New("no worker command")
	}
	if err := o.Timing.validate(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, t := range o.Types {
		if err := t.validate(); err != nil {
			return err
		}
		if seen[t.Name] {
			return fmt.Errorf("type %s: given twice", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// The statuses of a scenario.
const (
	StatusPass = "pass"
	StatusFail = "fail"
	StatusSkip = "skip"
)

// Duration is a time.Duration that reads as text in JSON ("1.25s").
type Duration time.Duration

// MarshalText writes d rounded to the millisecond.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).Round(time.Millisecond).String()), nil
}

// UnmarshalText reads what MarshalText wrote.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// Result is what one scenario found.
type Result struct {
	Scenario string `json:"scenario"`
	// Status is StatusPass, StatusFail or StatusSkip (Reason says why).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Failures say what failed, one line each.
	Failures []string `json:"failures,omitempty"`
	// Notes say what the scenario saw that is no failure.
	Notes []string `json:"notes,omitempty"`
	// Tasks is how many tasks the scenario enqueued; Succeeded how many
	// succeeded with exactly one ledger row; Lost how many are missing,
	// dead, cancelled or succeeded without their effect; Twice how many
	// have more than one committed effect; Stuck how many had not finished
	// when the scenario's time ran out; Rescued how many were taken back
	// from a dead, stopped or cut-off worker.
	Tasks     int `json:"tasks"`
	Succeeded int `json:"succeeded"`
	Lost      int `json:"lost"`
	Twice     int `json:"twice"`
	Stuck     int `json:"stuck"`
	Rescued   int `json:"rescued"`
	// RescueTime: from the fault to the last rescue of a task the faulty
	// worker held. TakeoverTime: from the leader's death to a new leader.
	// RecoveryTime: from the end of the connection cut to the first task
	// completed after it. StopTime: from SIGTERM to the process's exit.
	RescueTime   Duration `json:"rescue_time,omitempty"`
	TakeoverTime Duration `json:"takeover_time,omitempty"`
	RecoveryTime Duration `json:"recovery_time,omitempty"`
	StopTime     Duration `json:"stop_time,omitempty"`
	// Elapsed is the scenario's wall time.
	Elapsed Duration `json:"elapsed"`
}

// Report is a run's results.
type Report struct {
	Database string    `json:"database"`
	Started  time.Time `json:"started"`
	Elapsed  Duration  `json:"elapsed"`
	// Verdict is StatusPass when no scenario failed, else StatusFail.
	Verdict string   `json:"verdict"`
	Results []Result `json:"results"`
}

// scenario is one fault and what must hold after it.
type scenario struct {
	name, about string
	run         func(r *run) error
}

// scenarios, in the order a run takes them.
var scenarios = []scenario{
	{"kill-worker", "SIGKILL a worker in the middle of a batch", killWorker},
	{"stop-worker", "SIGSTOP a worker past its lease, then SIGCONT", stopWorker},
	{"kill-leader", "SIGKILL the leader while it runs tasks", killLeader},
	{"cut", "cut every database connection for " + cutFor.String() + " through a local TCP proxy", cutConnections},
	{"sigterm", "SIGTERM a worker in the middle of a batch", sigterm},
	{"kill-in-step", "SIGKILL a worker inside a durable step", killInStep},
}

// Scenarios returns the scenarios' names, in the order a run takes them.
func Scenarios() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.name)
	}
	return out
}

// About describes the scenario name in a line.
func About(name string) string {
	for _, s := range scenarios {
		if s.name == name {
			return s.about
		}
	}
	return ""
}

// Run runs the scenarios one after the other, each in a database of its
// own that it drops afterwards, and reports what each found. The error is
// for a run that could not be made (bad options, no database); a scenario
// that failed is in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	rep := &Report{Database: Kind(o.DSN), Started: time.Now().UTC(), Verdict: StatusPass}
	for _, s := range scenarios {
		if !slices.Contains(o.Scenarios, s.name) {
			continue
		}
		o.Log("%s: %s", s.name, s.about)
		res := runOne(ctx, o, s)
		why := strings.Join(append(slices.Clip(res.Failures), res.Reason), "; ")
		o.Log("%s: %s", s.name, strings.TrimSuffix(res.Status+": "+strings.Trim(why, "; "), ": "))
		if res.Status == StatusFail {
			rep.Verdict = StatusFail
		}
		rep.Results = append(rep.Results, res)
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	rep.Elapsed = Duration(time.Since(rep.Started))
	return rep, nil
}

// runOne runs scenario s in a new space and drops the space.
func runOne(ctx context.Context, o Options, s scenario) Result {
	start := time.Now()
	r := &run{ctx: ctx, o: o, res: &Result{Scenario: s.name}, deadline: start.Add(o.Duration)}
	err := r.setup()
	if err == nil {
		err = s.run(r)
	}
	var skip skipError
	switch {
	case errors.As(err, &skip):
		r.res.Status, r.res.Reason = StatusSkip, skip.why
	case err != nil:
		r.failf("%v", err)
	}
	r.teardown()
	if r.res.Status == "" {
		r.res.Status = StatusPass
		if len(r.res.Failures) > 0 {
			r.res.Status = StatusFail
		}
	}
	r.res.Elapsed = Duration(time.Since(start))
	return *r.res
}

// skipError says why a scenario does not apply.
type skipError struct{ why string }

func (e skipError) Error() string { return e.why }

// run is one scenario's bundle: its space, a control driver on it, an
// enqueue-only client, the worker processes and the result.
type run struct {
	ctx      context.Context
	o        Options
	res      *Result
	deadline time.Time
	sp       *space
	drv      driver.Driver
	db       *sql.DB
	client   *keel.Client
	procs    []*proc
	nodes    int
	ids      []int64
}

func (r *run) setup() error {
	sp, err := newSpace(r.ctx, r.o.DSN)
	if err != nil {
		return err
	}
	r.sp = sp
	if r.drv, r.db, err = sp.open(r.ctx, sp.dsn, 4); err != nil {
		return err
	}
	for _, stmt := range ledgerDDL(sp) {
		if _, err := r.db.ExecContext(r.ctx, stmt); err != nil {
			return fmt.Errorf("create the ledger: %w", err)
		}
	}
	types := []string{workType, stepsType}
	for _, t := range r.o.Types {
		types = append(types, t.Name)
	}
	if r.client, err = keel.NewClient(keel.Config{Driver: r.drv, Types: types}); err != nil {
		return err
	}
	return r.storeLimits()
}

// teardown kills every worker, closes the driver and drops the space.
func (r *run) teardown() {
	for _, p := range r.procs {
		if p.alive() {
			p.kill()
		}
		if r.res.Status != StatusSkip && len(r.res.Failures) > 0 {
			r.o.Log("worker %s stderr (end):\n%s", p.node, p.stderr.tail(1500))
		}
	}
	if r.drv != nil {
		r.drv.Close()
	}
	if r.sp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.sp.drop(ctx); err != nil {
			r.failf("drop the scenario's database: %v", err)
		}
	}
}

// failf records a failure.
func (r *run) failf(format string, args ...any) {
	r.res.Failures = append(r.res.Failures, fmt.Sprintf(format, args...))
}

// notef records a note and logs it.
func (r *run) notef(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	r.res.Notes = append(r.res.Notes, n)
	r.o.Log("%s: %s", r.res.Scenario, n)
}

// startWorker starts a worker process of kind ("work" or "steps") whose
// handler takes delay, connecting through dsn ("" for the space's own).
func (r *run) startWorker(kind string, delay time.Duration, dsn string) (*proc, error) {
	r.nodes++
	node := fmt.Sprintf("chaos-%d", r.nodes)
	cmd := r.o.Command()
	cmd.Env = append(cmd.Environ(), EnvWorker+"="+kind, envDSN+"="+or(dsn, r.sp.dsn), envKind+"="+r.sp.kind,
		envSchema+"="+r.sp.schema, envNode+"="+node, envDelay+"="+delay.String(), envTiming+"="+r.o.Timing.env(),
		envTypes+"="+typesEnv(r.o.Types))
	p, err := startProc(node, cmd)
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, p)
	return p, nil
}

// startWorkers starts n workers of kind "work".
func (r *run) startWorkers(n int, delay time.Duration, dsn string) ([]*proc, error) {
	var out []*proc
	for range n {
		p, err := r.startWorker("work", delay, dsn)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// or is a unless it is empty, else b.
func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// runAtStep separates the tasks' run_at, so their queue order is strict
// and a rescued task keeps its place.
const runAtStep = 10 * time.Millisecond

// enqueueWork stores n tasks of the work types (workTypes, round robin),
// as enqueue does.
func (r *run) enqueueWork(n int) error { return r.enqueue(r.workTypes(), n, runAtStep) }

// enqueueLine stores n tasks of the work types all runnable from now, a
// line behind every task enqueueWork stored before (lineGap).
func (r *run) enqueueLine(n int) error { return r.enqueue(r.workTypes(), n, 0) }

// lineGap is how long before its enqueue the last task of a batch is
// runnable: a line enqueued later is runnable more than a second after
// it, and a rescued task (its run_at plus a backoff of 200ms at most)
// comes before the line.
const lineGap = 2 * time.Second

// enqueue stores n tasks of types (round robin), runnable step apart,
// the last lineGap ago; with step 0, all runnable now.
func (r *run) enqueue(types []string, n int, step time.Duration) error {
	first := time.Now()
	if step > 0 {
		first = first.Add(-time.Duration(n)*step - lineGap)
	}
	settings := map[string][]keel.Option{} // the user's types' queue, priority, timeout
	for _, t := range r.o.Types {
		settings[t.Name] = t.options()
	}
	specs := make([]keel.TaskSpec, 0, n)
	for i := range n {
		typ := types[i%len(types)]
		opts := append(slices.Clip(settings[typ]), keel.RunAt(first.Add(time.Duration(i)*step)))
		specs = append(specs, keel.TaskSpec{Type: typ, Payload: job{N: i}, Options: opts})
	}
	infos, err := r.client.EnqueueMany(r.ctx, specs)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	for _, in := range infos {
		r.ids = append(r.ids, in.ID)
	}
	r.res.Tasks += n
	return nil
}
