package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchRejectsBadFlags: bad settings are refused with a clear error
// before the bench creates its database.
func TestBenchRejectsBadFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--claim-batch", "0"}, "--claim-batch must be in 1..1000, got 0"},
		{[]string{"--claim-batch", "1001"}, "--claim-batch must be in 1..1000, got 1001"},
		{[]string{"--workers", "0"}, "--workers must be positive, got 0"},
		{[]string{"--insert-batch", "-1"}, "--insert-batch must be positive, got -1"},
		{[]string{"--rate", "10"}, "--rate needs --duration"},
		{[]string{"--vacuum"}, "--vacuum needs --prefill"},
		{[]string{"--vacuum", "--prefill", "10"}, "--vacuum needs a PostgreSQL --dsn"},
	} {
		db := filepath.Join(t.TempDir(), "bench.db")
		out, err := runKeel(t, append([]string{"bench", "-n", "10", "--db", db}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q\n%s", c.args, err, c.want, out)
		}
		if _, statErr := os.Stat(db); !os.IsNotExist(statErr) {
			t.Errorf("%v: the bench created %s before refusing", c.args, db)
		}
	}
}

// TestBenchDrainsWithClaimBatch: a small drain with the bench's settings
// works every task and says which settings it used.
func TestBenchDrainsWithClaimBatch(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bench.db")
	out, err := runKeel(t, "bench", "-n", "3000", "--db", db, "--workers", "300", "--claim-batch", "150")
	if err != nil {
		t.Fatalf("keel bench: %v\n%s", err, out)
	}
	for _, want := range []string{"300 workers, claims of up to 150", "succeeded in database: 3000)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchProfilePathMustBeWritable: a profile file that cannot be
// created fails the bench before it measures, with the path in the error;
// none is reported as written when it was not.
func TestBenchProfilePathMustBeWritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, flag := range []string{"--cpuprofile", "--mutexprofile", "--blockprofile", "--memprofile"} {
		bad := filepath.Join(dir, "missing", flag[2:]+".out")
		out, err := runKeel(t, "bench", "-n", "200", "--db", filepath.Join(dir, flag[2:]+".db"), flag, bad)
		if err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("keel bench %s %s: error %v, want one naming the path\n%s", flag, bad, err, out)
		}
		if strings.Contains(out, "worked ") {
			t.Errorf("keel bench %s %s measured anyway:\n%s", flag, bad, out)
		}
	}
}

// TestBenchHTTPPrintsBothRates: each HTTP load runs briefly and prints
// keel's rate, the plain reference's rate and their ratio. No timing is
// checked.
func TestBenchHTTPPrintsBothRates(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		load string
		want []string
	}{
		{"enqueue", []string{"enqueue: 4 clients", "keel serve", "plain net/http server", "tasks/s", "requests/s", "ratio keel/reference"}},
		{"dispatch", []string{"dispatch: 300 tasks", "keel serve", "300 in", "plain Go client", "tasks/s", "requests/s", "ratio keel/reference"}},
	} {
		t.Run(c.load, func(t *testing.T) { // not parallel: one CPU profile at a time
			dir := t.TempDir()
			out, err := runKeel(t, "bench", "http", "--load", c.load, "--clients", "4", "--duration", "300ms",
				"--workers", "8", "-n", "300", "--dir", dir, "--cpuprofile", filepath.Join(dir, "cpu.out"),
				"--mutexprofile", filepath.Join(dir, "mutex.out"), "--blockprofile", filepath.Join(dir, "block.out"),
				"--memprofile", filepath.Join(dir, "mem.out"))
			if err != nil {
				t.Fatalf("keel bench http: %v\n%s", err, out)
			}
			for _, want := range c.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			for _, p := range []string{"cpu.out", "mutex.out", "block.out", "mem.out"} {
				if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.Size() == 0 {
					t.Errorf("profile %s not written: %v", p, err)
				}
			}
		})
	}
}

// TestBenchHTTPRejectsBadFlags: bad settings are refused before anything
// starts.
func TestBenchHTTPRejectsBadFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--load", "both2"}, "--load must be enqueue, dispatch or both"},
		{[]string{"--clients", "0"}, "--clients must be positive, got 0"},
		{[]string{"--server", "http://127.0.0.1:1"}, "--server measures the enqueue load only"},
		{[]string{"--token", "t"}, "--token needs --server"},
	} {
		out, err := runKeel(t, append([]string{"bench", "http"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q\n%s", c.args, err, c.want, out)
		}
	}
}
