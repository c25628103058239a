package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// benchCompare is keel bench --compare: interleaved pairs of runs of this
// build's bench and another program's, each in a process of its own.
type benchCompare struct {
	other  string // the program to compare with; empty: no comparison
	rounds int
	kind   string // auto, keel or river
}

func (c *benchCompare) flags(f *pflag.FlagSet) {
	f.StringVar(&c.other, "compare", "", "run this build's bench and this program's in alternating pairs and print each pair's ratio and the median: another keel binary, or River's bench/river")
	f.IntVar(&c.rounds, "rounds", 7, "with --compare: pairs to run")
	f.StringVar(&c.kind, "compare-kind", "auto", "with --compare: what the program is, keel or river; auto: read its --help")
}

// compareFlags are the flags that steer the comparison; the children get
// the others.
var compareFlags = []string{"compare", "rounds", "compare-kind"}

// riverFlags are the flags River's bench takes: it runs its own settings
// (2,000 workers, inserts of 5,000).
var riverFlags = []string{"n", "duration", "dsn"}

// riverInsertBatch is how many jobs River's bench inserts at a time.
const riverInsertBatch = 5000

// benchMetric is the headline figure of one bench run.
type benchMetric int

const (
	drainRate  benchMetric = iota // jobs/s worked down after inserting -n
	steadyRate                    // jobs/s with insert and work at once (--duration)
	pickupP99                     // pickup latency's p99 at a fixed rate (--rate), in seconds
)

func metricOf(o benchOptions) benchMetric {
	switch {
	case o.rate > 0:
		return pickupP99
	case o.duration > 0:
		return steadyRate
	}
	return drainRate
}

// figureLine finds each metric's figure in a bench's output, keel's or
// River's ("tasks" or "jobs").
var figureLine = map[benchMetric]*regexp.Regexp{
	drainRate:  regexp.MustCompile(`(?m)^worked \d+ (?:tasks|jobs) in \S+: ([0-9.]+) jobs/s`),
	steadyRate: regexp.MustCompile(`(?m)^inserted \d+ and worked \d+ (?:tasks|jobs) in \S+: ([0-9.]+) jobs/s`),
	pickupP99:  regexp.MustCompile(`(?m)pickup latency p50 \S+ p95 \S+ p99 (\S+) max `),
}

// parseFigure reads m's figure from a bench's output.
func parseFigure(m benchMetric, out string) (float64, error) {
	sub := figureLine[m].FindStringSubmatch(out)
	if sub == nil {
		return 0, errors.New("no figure in its output")
	}
	if m == pickupP99 {
		d, err := time.ParseDuration(sub[1])
		return d.Seconds(), err
	}
	return strconv.ParseFloat(sub[1], 64)
}

func (m benchMetric) format(v float64) string {
	if m == pickupP99 {
		return fmt.Sprintf("p99 %v", time.Duration(v*float64(time.Second)).Round(time.Microsecond))
	}
	return fmt.Sprintf("%.0f jobs/s", v)
}

func (m benchMetric) String() string {
	switch m {
	case steadyRate:
		return "jobs/s with insert and work at once; higher is better"
	case pickupP99:
		return "pickup latency p99; lower is better: a ratio below 1 means this build picks tasks up sooner"
	}
	return "jobs/s drained; higher is better"
}

// benchSide is one of the two programs compared.
type benchSide struct {
	name string // "this" or "other"
	path string
	args []string
}

func (s benchSide) String() string { return strings.Join(append([]string{s.path}, s.args...), " ") }

// comparePlan is a checked comparison, ready to run.
type comparePlan struct {
	this, other benchSide
	otherKind   string
	rounds      int
	metric      benchMetric
}

// order is the sides in round r's order (from 1): this build first in odd
// rounds, the other program first in even ones.
func (p comparePlan) order(r int) [2]benchSide {
	if r%2 == 1 {
		return [2]benchSide{p.this, p.other}
	}
	return [2]benchSide{p.other, p.this}
}

// planCompare checks the comparison's settings and the other program, and
// builds both command lines. It runs nothing but the other program's
// --help.
func planCompare(ctx context.Context, o benchOptions, f *pflag.FlagSet, self string) (comparePlan, error) {
	c := o.compare
	if c.rounds < 1 {
		return comparePlan{}, fmt.Errorf("--rounds must be positive, got %d", c.rounds)
	}
	if !slices.Contains([]string{"auto", "keel", "river"}, c.kind) {
		return comparePlan{}, fmt.Errorf("--compare-kind must be auto, keel or river, got %q", c.kind)
	}
	if err := o.validate(); err != nil {
		return comparePlan{}, err
	}
	for _, name := range []string{"db", "cpuprofile", "mutexprofile", "blockprofile", "memprofile"} {
		if f.Changed(name) {
			return comparePlan{}, fmt.Errorf("--compare runs each bench on a new database and profiles none: leave out --%s", name)
		}
	}
	other, err := exec.LookPath(c.other)
	if err != nil {
		return comparePlan{}, fmt.Errorf("--compare %s: not a program that can be run: %w", c.other, err)
	}
	kind := c.kind
	if kind == "auto" {
		if kind, err = detectKind(ctx, other); err != nil {
			return comparePlan{}, err
		}
	}
	var changed []*pflag.Flag // the bench flags given, in order of name
	f.Visit(func(fl *pflag.Flag) {
		if !slices.Contains(compareFlags, fl.Name) {
			changed = append(changed, fl)
		}
	})
	p := comparePlan{otherKind: kind, rounds: c.rounds, metric: metricOf(o)}
	p.this = benchSide{name: "this", path: self, args: benchArgs(changed, nil)}
	p.other = benchSide{name: "other", path: other}
	switch kind {
	case "keel":
		// Asked only now for --compare-kind keel: another program could
		// take "bench --help" for a bench to run.
		if c.kind == "keel" && kindOf(helpOf(ctx, other, "--help")) != "keel" {
			return comparePlan{}, fmt.Errorf("--compare: %s does not answer --help as keel does", other)
		}
		takes, err := keelBenchFlags(ctx, other)
		if err != nil {
			return comparePlan{}, err
		}
		for _, fl := range changed {
			if !takes[fl.Name] {
				return comparePlan{}, fmt.Errorf("--compare: %s bench has no --%s", other, fl.Name)
			}
		}
		// Each build on a schema of its own: neither finds the other's
		// tables, whatever their migrations.
		var schema []string
		if o.dsn != "" && takes["schema"] {
			schema = []string{"--schema=" + o.schema + "_other"}
		}
		p.other.args = benchArgs(changed, schema)
	case "river":
		if !isPostgresDSN(o.dsn) {
			return comparePlan{}, errors.New("--compare: River runs on PostgreSQL only: give --dsn postgres://…")
		}
		var args []string
		for _, fl := range changed {
			if fl.Name == "schema" {
				continue // keel's; River's bench uses its own
			}
			if !slices.Contains(riverFlags, fl.Name) {
				return comparePlan{}, fmt.Errorf("--compare: River's bench takes only -n, --duration and --dsn (it runs its own settings), not --%s", fl.Name)
			}
		}
		if o.duration == 0 && o.n%riverInsertBatch != 0 {
			return comparePlan{}, fmt.Errorf("--compare: River's bench inserts %d jobs at a time, so it would work more than -n %d: give a multiple of %d", riverInsertBatch, o.n, riverInsertBatch)
		}
		// Always the same -n and --dsn as this build's, even where they are
		// both programs' defaults.
		args = append(args, "-n="+strconv.Itoa(o.n), "--dsn="+o.dsn)
		if o.duration > 0 {
			args = append(args, "--duration="+o.duration.String())
		}
		p.other.args = args
	}
	return p, nil
}

// benchArgs is a keel bench command line with the flags given, and extra.
func benchArgs(changed []*pflag.Flag, extra []string) []string {
	args := []string{"bench"}
	for _, fl := range changed {
		if len(extra) > 0 && fl.Name == "schema" {
			continue
		}
		args = append(args, "--"+fl.Name+"="+fl.Value.String())
	}
	return append(args, extra...)
}

// helpOf runs path with args, expecting a help text, and returns what it
// printed.
func helpOf(ctx context.Context, path string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, path, args...).CombinedOutput() // a Go flag.FlagSet's -help exits 0, an older one 2
	return string(out)
}

// helpFlag finds the flags in a help text, cobra's ("  -n, --n int",
// "      --dsn string") or Go flag's ("  -dsn string").
var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-[A-Za-z0-9], )?--?([A-Za-z0-9][A-Za-z0-9-]*)`)

func flagsIn(help string) map[string]bool {
	m := map[string]bool{}
	for _, sub := range helpFlag.FindAllStringSubmatch(help, -1) {
		m[sub[1]] = true
	}
	return m
}

// detectKind tells keel from River's bench by path --help: see kindOf.
func detectKind(ctx context.Context, path string) (string, error) {
	if kind := kindOf(helpOf(ctx, path, "--help")); kind != "" {
		return kind, nil
	}
	return "", fmt.Errorf("--compare: %s --help looks like neither keel nor River's bench/river; say which with --compare-kind keel or river", path)
}

// kindOf is "keel" or "river" for a program's --help, or "" for neither:
// keel's help names its command "keel [command]"; River's bench is a Go
// flag program with -n, -duration and -dsn.
func kindOf(help string) string {
	if strings.Contains(help, "keel [command]") {
		return "keel"
	}
	fl := flagsIn(help)
	if strings.HasPrefix(help, "Usage of ") && fl["n"] && fl["duration"] && fl["dsn"] {
		return "river"
	}
	return ""
}

// keelBenchFlags are the flags that path's keel bench takes.
func keelBenchFlags(ctx context.Context, path string) (map[string]bool, error) {
	help := helpOf(ctx, path, "bench", "--help")
	if !strings.Contains(help, "keel bench") {
		return nil, fmt.Errorf("--compare: %s has no keel bench command:\n%s", path, help)
	}
	return flagsIn(help), nil
}

// sideRun is one run of one side's bench.
type sideRun struct {
	figure         float64
	stdout, stderr string
}

// runSide runs one side's bench to its end and reads its figure.
func runSide(ctx context.Context, s benchSide, m benchMetric) (sideRun, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, s.path, s.args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	run := sideRun{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		return run, fmt.Errorf("%s: %w\n%s%s", s, err, run.stdout, run.stderr)
	}
	if run.figure, err = parseFigure(m, run.stdout); err != nil {
		return run, fmt.Errorf("%s: %w\n%s%s", s, err, run.stdout, run.stderr)
	}
	if run.figure <= 0 {
		return run, fmt.Errorf("%s: a figure of %v\n%s%s", s, run.figure, run.stdout, run.stderr)
	}
	return run, nil
}

// comparePair is one round's figures.
type comparePair struct{ this, other float64 }

func (p comparePair) ratio() float64 { return p.this / p.other }

// runCompare runs the plan's rounds with run and prints each pair and then
// the medians.
func runCompare(ctx context.Context, out io.Writer, p comparePlan,
	run func(context.Context, benchSide, benchMetric) (sideRun, error)) ([]comparePair, error) {
	fmt.Fprintf(out, "keel bench --compare: %s, alternating which runs first; figure: %v\n", plural(p.rounds, "round"), p.metric)
	fmt.Fprintf(out, "  this (this build): %s\n  other (%s): %s\n", p.this, p.otherKind, p.other)
	var pairs []comparePair
	for r := 1; r <= p.rounds; r++ {
		var pair comparePair
		for _, s := range p.order(r) {
			res, err := run(ctx, s, p.metric)
			if err != nil {
				return pairs, fmt.Errorf("round %d, %s: %w", r, s.name, err)
			}
			if r == 1 { // each program's own description of its run
				first, _, _ := strings.Cut(res.stdout, "\n")
				fmt.Fprintf(out, "  %s, round 1: %s\n", s.name, first)
			}
			for line := range strings.Lines(res.stderr) { // warnings, such as a checkpoint not made
				fmt.Fprintf(out, "  round %d, %s, stderr: %s", r, s.name, strings.TrimSuffix(line, "\n")+"\n")
			}
			if s.name == "this" {
				pair.this = res.figure
			} else {
				pair.other = res.figure
			}
		}
		first := p.order(r)[0].name
		fmt.Fprintf(out, "round %d (%s first): this %s, other %s, this÷other %.2f\n",
			r, first, p.metric.format(pair.this), p.metric.format(pair.other), pair.ratio())
		pairs = append(pairs, pair)
	}
	ratios, these, others := make([]float64, len(pairs)), make([]float64, len(pairs)), make([]float64, len(pairs))
	for i, pair := range pairs {
		ratios[i], these[i], others[i] = pair.ratio(), pair.this, pair.other
	}
	fmt.Fprintf(out, "median this÷other of %s: %.2f (range %.2f–%.2f)\n",
		plural(len(pairs), "round"), median(ratios), slices.Min(ratios), slices.Max(ratios))
	fmt.Fprintf(out, "medians: this %s, other %s\n", p.metric.format(median(these)), p.metric.format(median(others)))
	return pairs, nil
}

// median is the middle of v, or the mean of its two middle values.
func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runBenchCompare is keel bench --compare: it checks everything, then runs
// the pairs.
func runBenchCompare(ctx context.Context, out io.Writer, o benchOptions, f *pflag.FlagSet) error {
	if ctx == nil {
		ctx = context.Background()
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--compare: this build's path: %w", err)
	}
	p, err := planCompare(ctx, o, f, self)
	if err != nil {
		return err
	}
	_, err = runCompare(ctx, out, p, runSide)
	return err
}

// plural is "1 round" or "n rounds".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
