package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestParseFigure: each mode's headline is read from keel's output and
// from River's bench's, and only from its own line.
func TestParseFigure(t *testing.T) {
	t.Parallel()
	keelDrain := `keel bench: SQLite /tmp/keel-bench-1/bench.db (synchronous=FULL), 1000 workers, claims of up to 500
inserted 20000 tasks in 412ms (48544 tasks/s)
worked 20000 tasks in 645ms: 31008 jobs/s (succeeded in database: 20000)
outcome commit (handler return to committed, keel_outcome_commit_seconds) of 20000 tasks: p50 1.2ms p95 3ms p99 4ms max 9ms
`
	riverDrain := `river-bench: River on PostgreSQL, schema river_bench (dropped and created anew), 2000 workers
inserted 20000 jobs in 380ms
worked 20000 jobs in 1.234s: 16207 jobs/s
`
	keelSteady := "keel bench: SQLite x\ninserted 52000 and worked 51000 tasks in 2.001s: 25487 jobs/s\n"
	riverSteady := "river-bench: x\ninserted 150000 and worked 74000 jobs in 10s: 7400 jobs/s\n"
	keelRate := "keel bench: x\nenqueued 1000 tasks at 100/s, worked 1000; pickup latency p50 940µs p95 1.61ms p99 2.242ms max 12.5ms\n"
	for _, c := range []struct {
		metric benchMetric
		out    string
		want   float64 // 0: no figure
	}{
		{drainRate, keelDrain, 31008},
		{drainRate, riverDrain, 16207},
		{steadyRate, keelSteady, 25487},
		{steadyRate, riverSteady, 7400},
		{pickupP99, keelRate, 0.002242},
		{pickupP99, "… pickup latency p50 1ms p95 2ms p99 1.5s max 2s\n", 1.5},
		{drainRate, keelSteady, 0},
		{steadyRate, keelDrain, 0},
		{pickupP99, keelDrain, 0},
		{drainRate, "keel bench: x\ninserted 100 tasks in 1ms (100000 tasks/s)\n", 0},
		{drainRate, "", 0},
	} {
		got, err := parseFigure(c.metric, c.out)
		switch {
		case c.want == 0 && err == nil:
			t.Errorf("%v in %q: %v, want no figure", c.metric, c.out, got)
		case c.want != 0 && (err != nil || got != c.want):
			t.Errorf("%v in %q: %v, %v, want %v", c.metric, c.out, got, err, c.want)
		}
	}
}

// TestMedian: the middle value, or the mean of the two middle ones.
func TestMedian(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1.2, 0.8}, 1},
	} {
		if got := median(c.v); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

// TestCompareAlternatesAndSummarizes: this build runs first in odd rounds,
// the other program in even ones; each pair's ratio, the median ratio with
// its range and each side's median are printed.
func TestCompareAlternatesAndSummarizes(t *testing.T) {
	t.Parallel()
	p := comparePlan{
		this:   benchSide{name: "this", path: "/bin/keel", args: []string{"bench"}},
		other:  benchSide{name: "other", path: "/bin/keel-old", args: []string{"bench"}},
		rounds: 3, otherKind: "keel", metric: drainRate,
	}
	var ran []string
	thisRates := []float64{100, 120, 110} // other: 100 each round
	run := func(_ context.Context, s benchSide, _ benchMetric) (sideRun, error) {
		ran = append(ran, s.name)
		v := 100.0
		if s.name == "this" {
			v = thisRates[(len(ran)-1)/2]
		}
		return sideRun{figure: v, stdout: "keel bench: " + s.path + "\n"}, nil
	}
	var out bytes.Buffer
	pairs, err := runCompare(context.Background(), &out, p, run)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"this", "other", "other", "this", "this", "other"}; !slices.Equal(ran, want) {
		t.Errorf("order %v, want %v", ran, want)
	}
	if len(pairs) != 3 || pairs[1] != (comparePair{this: 120, other: 100}) {
		t.Errorf("pairs %v", pairs)
	}
	for _, want := range []string{
		"round 1 (this first): this 100 jobs/s, other 100 jobs/s, this÷other 1.00\n",
		"round 2 (other first): this 120 jobs/s, other 100 jobs/s, this÷other 1.20\n",
		"round 3 (this first): this 110 jobs/s, other 100 jobs/s, this÷other 1.10\n",
		"median this÷other of 3 rounds: 1.10 (range 1.00–1.20)\n",
		"medians: this 110 jobs/s, other 100 jobs/s\n",
		"other, round 1: keel bench: /bin/keel-old\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestComparePickupSaysLowerIsBetter: in --rate mode the figure is the
// pickup p99 and the output says which way is better.
func TestComparePickupSaysLowerIsBetter(t *testing.T) {
	t.Parallel()
	p := comparePlan{this: benchSide{name: "this"}, other: benchSide{name: "other"}, rounds: 2, metric: pickupP99}
	run := func(_ context.Context, s benchSide, _ benchMetric) (sideRun, error) {
		if s.name == "this" {
			return sideRun{figure: 0.002}, nil
		}
		return sideRun{figure: 0.004}, nil
	}
	var out bytes.Buffer
	if _, err := runCompare(context.Background(), &out, p, run); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lower is better", "this p99 2ms, other p99 4ms, this÷other 0.50", "median this÷other of 2 rounds: 0.50"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCompareFailsWithTheOutput: a run that fails, or prints no figure,
// stops the comparison with that run's output.
func TestCompareFailsWithTheOutput(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("runs a shell script")
	}
	dir := t.TempDir()
	for _, c := range []struct{ script, want string }{
		{"echo 'keel bench: x'; echo 'no such table' >&2; exit 1", "no such table"},
		{"echo 'keel bench: x'; echo 'worked 10 tasks in 1s'", "no figure in its output"},
	} {
		prog := writeScript(t, dir, c.script)
		_, err := runSide(context.Background(), benchSide{name: "other", path: prog}, drainRate)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "keel bench: x") {
			t.Errorf("%q: error %v, want one with %q and the output", c.script, err, c.want)
		}
	}
}

// TestKindOf: keel and River's bench are told apart by their --help.
func TestKindOf(t *testing.T) {
	t.Parallel()
	keelHelp := "keel is a durable background task system.\n\nUsage:\n  keel [command]\n\nAvailable Commands:\n  bench  Measure\n"
	riverHelp := `Usage of /tmp/river-bench:
  -dsn string
    	PostgreSQL DSN (default "postgres://postgres@127.0.0.1:5432/test")
  -duration duration
    	run continuous insert-and-work for this long instead of draining
  -n int
    	jobs to insert and drain (default 100000)
  -schema string
    	schema to use; it is DROPPED and created anew (default "river_bench")
`
	for help, want := range map[string]string{keelHelp: "keel", riverHelp: "river", "": "", "Usage of x:\n  -n int\n": ""} {
		if got := kindOf(help); got != want {
			t.Errorf("kindOf(%q) = %q, want %q", help, got, want)
		}
	}
}

// TestComparePlansCommandLines: the other keel gets the same flags and a
// schema of its own; River gets -n, --dsn and --duration only.
func TestComparePlansCommandLines(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("runs a shell script")
	}
	dir := t.TempDir()
	fakeKeel := writeScript(t, dir, fakeKeelScript(filepath.Join(dir, "log"), "n", "dsn", "schema", "workers"))
	fakeRiver := writeScript(t, dir, `echo "Usage of $0:"; echo "  -dsn string"; echo "  -duration duration"; echo "  -n int"`)
	const dsn = "postgres://postgres@127.0.0.1:5432/test"
	for _, c := range []struct {
		args       []string
		this, want string
	}{
		{[]string{"--compare", fakeKeel, "-n", "5000", "--workers", "10"},
			"bench --n=5000 --workers=10", "bench --n=5000 --workers=10"},
		{[]string{"--compare", fakeKeel, "--dsn", dsn},
			"bench --dsn=" + dsn, "bench --dsn=" + dsn + " --schema=keel_bench_other"},
		{[]string{"--compare", fakeKeel, "--dsn", dsn, "--schema", "mine"},
			"bench --dsn=" + dsn + " --schema=mine", "bench --dsn=" + dsn + " --schema=mine_other"},
		{[]string{"--compare", fakeRiver, "--dsn", dsn, "-n", "20000", "--rounds", "2"},
			"bench --dsn=" + dsn + " --n=20000", "-n=20000 --dsn=" + dsn},
		{[]string{"--compare", fakeRiver, "--compare-kind", "river", "--dsn", dsn, "--duration", "5s", "--schema", "k"},
			"bench --dsn=" + dsn + " --duration=5s --schema=k", "-n=100000 --dsn=" + dsn + " --duration=5s"},
	} {
		p, err := planFor(c.args...)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if got := strings.Join(p.this.args, " "); got != c.this {
			t.Errorf("%v: this runs %q, want %q", c.args, got, c.this)
		}
		if got := strings.Join(p.other.args, " "); got != c.want {
			t.Errorf("%v: other runs %q, want %q", c.args, got, c.want)
		}
	}
}

// TestCompareRejectsBadInput: bad settings, a missing program and flags the
// other program cannot take are refused with a clear error before any
// bench runs.
func TestCompareRejectsBadInput(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("runs a shell script")
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	fakeKeel := writeScript(t, dir, fakeKeelScript(log, "n", "dsn"))
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unknown := writeScript(t, dir, `echo "$@" >> `+log+`; echo "usage: unknown"`)
	const pg = "postgres://postgres@127.0.0.1:5432/test"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--compare", fakeKeel, "--rounds", "0"}, "--rounds must be positive, got 0"},
		{[]string{"--rounds", "3"}, "--rounds needs --compare"},
		{[]string{"--compare-kind", "keel"}, "--compare-kind needs --compare"},
		{[]string{"--compare", filepath.Join(dir, "missing")}, "not a program that can be run"},
		{[]string{"--compare", plain}, "not a program that can be run"},
		{[]string{"--compare", fakeKeel, "--compare-kind", "rabbit"}, `--compare-kind must be auto, keel or river, got "rabbit"`},
		{[]string{"--compare", fakeKeel, "--workers", "0"}, "--workers must be positive, got 0"},
		{[]string{"--compare", fakeKeel, "--db", filepath.Join(dir, "b.db")}, "leave out --db"},
		{[]string{"--compare", fakeKeel, "--cpuprofile", filepath.Join(dir, "cpu")}, "leave out --cpuprofile"},
		{[]string{"--compare", fakeKeel, "--workers", "10"}, "bench has no --workers"},
		{[]string{"--compare", unknown}, "looks like neither keel nor River's bench/river"},
		{[]string{"--compare", unknown, "--compare-kind", "keel"}, "does not answer --help as keel does"},
		{[]string{"--compare", unknown, "--compare-kind", "river"}, "River runs on PostgreSQL only"},
		{[]string{"--compare", unknown, "--compare-kind", "river", "--dsn", "mysql://root@127.0.0.1:3306/test"}, "River runs on PostgreSQL only"},
		{[]string{"--compare", unknown, "--compare-kind", "river", "--dsn", pg, "--workers", "10"}, "River's bench takes only -n, --duration and --dsn"},
		{[]string{"--compare", unknown, "--compare-kind", "river", "--dsn", pg, "--duration", "1s", "--rate", "10"}, "not --rate"},
		{[]string{"--compare", unknown, "--compare-kind", "river", "--dsn", pg, "-n", "2000"}, "give a multiple of 5000"},
	} {
		out, err := runKeel(t, append([]string{"bench"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q\n%s", c.args, err, c.want, out)
		}
	}
	ran, _ := os.ReadFile(log)
	for _, line := range strings.Split(strings.TrimSpace(string(ran)), "\n") {
		if line != "--help" && line != "bench --help" {
			t.Errorf("a bench ran before the input was refused: %q", line)
		}
	}
}

// TestBenchCompareEndToEnd: keel bench --compare with the same binary runs
// two pairs of real benches on SQLite and prints their median.
func TestBenchCompareEndToEnd(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t) // skips under -short
	cmd := exec.Command(bin, "bench", "-n", "2000", "--workers", "200", "--compare", bin, "--rounds", "2")
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("keel bench --compare: %v\n%s", err, out)
	}
	for _, want := range []string{"other (keel): " + bin + " bench --n=2000 --workers=200\n",
		"round 1 (this first): this ", "round 2 (other first): this ", "median this÷other of 2 rounds: ", "medians: this "} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), "this÷other "); n != 2+1 {
		t.Errorf("%d ratios, want 2 pairs and a median:\n%s", n, out)
	}
}

// planFor is the comparison keel bench would run with args.
func planFor(args ...string) (comparePlan, error) {
	var o benchOptions
	f := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	o.flags(f)
	if err := f.Parse(args); err != nil {
		return comparePlan{}, err
	}
	return planCompare(context.Background(), o, f, "/self/keel")
}

// fakeKeelScript is a shell script that answers --help as keel does, and
// bench --help listing only flags; it logs every invocation to log and
// fails any other.
func fakeKeelScript(log string, flags ...string) string {
	var b strings.Builder
	for _, fl := range flags {
		fmt.Fprintf(&b, "      --%s string   a flag\\n", fl)
	}
	return `echo "$@" >> ` + log + `
case "$*" in
--help) printf 'Usage:\n  keel [command]\n' ;;
"bench --help") printf 'Usage:\n  keel bench [flags]\n\nFlags:\n` + b.String() + `' ;;
*) echo "ran a bench"; exit 1 ;;
esac
`
}

// writeScript writes an executable shell script of body into dir.
func writeScript(t *testing.T, dir, body string) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "prog-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("#!/bin/sh\n" + body + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o755); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}
