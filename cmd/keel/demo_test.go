package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
)

// runKeel runs the CLI in-process with args and returns its output.
func runKeel(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestDemoFinishesWithPlannedDeadLetters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "demo.db")
	out, err := runKeel(t, "demo", "-n", "120", "--seed", "7", "--db", path, "--deadline", "45s")
	if err != nil {
		t.Fatalf("keel demo: %v\n%s", err, out)
	}
	for _, want := range []string{"pending", "finished after", "dead letters (7)", "4 duplicates deduplicated", "checks:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\n  FAIL  ") {
		t.Errorf("a check failed:\n%s", out)
	}

	// Read the kept database independently of the demo's own report.
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	c, err := keel.NewClient(keel.Config{Driver: drv, Types: demoTypes})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.List(ctx, keel.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 120 {
		t.Fatalf("database holds %d tasks, want 120 (duplicates must not be stored)", len(tasks))
	}
	type dead struct {
		seq     int
		typ     string
		outcome driverOutcomeName
		attempt int
	}
	var gotDead []dead
	succeeded := 0
	for _, ti := range tasks {
		switch ti.State {
		case keel.StateSucceeded:
			succeeded++
			if len(ti.Result) == 0 {
				t.Errorf("succeeded task #%d has no result", ti.ID)
			}
		case keel.StateDead:
			var args struct{ Seq int }
			if err := json.Unmarshal(ti.Payload, &args); err != nil {
				t.Fatal(err)
			}
			last := ti.Errors[len(ti.Errors)-1]
			gotDead = append(gotDead, dead{args.Seq, ti.Type, driverOutcomeName(last.Outcome), ti.Attempt})
		default:
			t.Errorf("task #%d (%s) ended %s, want succeeded or dead", ti.ID, ti.Type, ti.State)
		}
	}
	slices.SortFunc(gotDead, func(a, b dead) int { return a.seq - b.seq })
	wantDead := []dead{
		{7, demoTypeEmail, "permanent", 1}, {23, demoTypeImage, "permanent", 1}, {41, demoTypeReport, "panic", 4},
		{57, demoTypeEmail, "permanent", 1}, {73, demoTypeImage, "permanent", 1}, {91, demoTypeReport, "panic", 4},
		{107, demoTypeEmail, "permanent", 1},
	}
	if !slices.Equal(gotDead, wantDead) {
		t.Errorf("dead letters:\n got  %v\n want %v", gotDead, wantDead)
	}
	if succeeded != 120-len(wantDead) {
		t.Errorf("%d succeeded, want %d", succeeded, 120-len(wantDead))
	}

	// The file is the user's: a second run refuses it rather than mixing runs.
	out, err = runKeel(t, "demo", "-n", "5", "--db", path)
	if err == nil || !strings.Contains(err.Error(), "already holds 120 tasks") {
		t.Errorf("second run on the same file: err = %v, want a refusal\n%s", err, out)
	}
}

type driverOutcomeName string

func TestDemoReportMatchesPlan(t *testing.T) {
	t.Parallel()
	o := demoOptions{n: 60, seed: 3, workers: 8, deadline: 45 * time.Second, every: 50 * time.Millisecond}
	rep, err := runDemo(context.Background(), io.Discard, io.Discard, o)
	if err != nil {
		t.Fatalf("runDemo: %v (problems: %v)", err, rep)
	}
	if len(rep.Problems) > 0 {
		t.Fatalf("problems: %v", rep.Problems)
	}
	if rep.ByState[keel.StateSucceeded] != 56 || rep.ByState[keel.StateDead] != 4 || rep.unfinished() != 0 {
		t.Errorf("states = %v, want 56 succeeded and 4 dead", rep.ByState)
	}
	if !slices.Equal(rep.PlannedDead, []int{7, 23, 41, 57}) {
		t.Errorf("planned dead = %v", rep.PlannedDead)
	}
	var deadSeqs []int
	for _, d := range rep.Dead {
		deadSeqs = append(deadSeqs, d.Seq)
	}
	slices.Sort(deadSeqs)
	if !slices.Equal(deadSeqs, rep.PlannedDead) {
		t.Errorf("dead seqs = %v, want %v", deadSeqs, rep.PlannedDead)
	}
	if rep.Deduped == 0 || rep.Submitted != 60+rep.Deduped+rep.Conflicts {
		t.Errorf("submitted %d, deduped %d, conflicts %d", rep.Submitted, rep.Deduped, rep.Conflicts)
	}
	if rep.Retried == 0 || rep.Outcomes["panic"] < 4 || rep.Outcomes["permanent"] != 3 {
		t.Errorf("retried %d, outcomes %v: want retries, the poison task's 4 panics and 3 permanent failures", rep.Retried, rep.Outcomes)
	}
}

func TestDemoFailsWhenTasksAreUnfinishedAtTheDeadline(t *testing.T) {
	t.Parallel()
	o := demoOptions{n: 200, seed: 1, workers: 2, deadline: time.Millisecond, every: time.Second}
	var out bytes.Buffer
	rep, err := runDemo(context.Background(), &out, io.Discard, o)
	if err == nil || !strings.Contains(err.Error(), "stuck:") {
		t.Fatalf("err = %v, want a stuck error\n%s", err, out.String())
	}
	if rep == nil || rep.unfinished() == 0 || len(rep.Problems) == 0 {
		t.Fatalf("report = %+v, want unfinished tasks and a failed check", rep)
	}
	if !strings.Contains(out.String(), "tasks are not succeeded or dead") {
		t.Errorf("summary does not show the failed check:\n%s", out.String())
	}
}

func TestDemoRejectsBadFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "x.db")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"demo", "-n", "-5", "--db", db}, "-n must be between 1 and 100000, got -5"},
		{[]string{"demo", "-n", "0", "--db", db}, "-n must be between 1 and 100000, got 0"},
		{[]string{"demo", "--workers", "0", "--db", db}, "--workers must be between 1 and 1000"},
		{[]string{"demo", "--deadline", "-1s", "--db", db}, "--deadline must be positive"},
		{[]string{"demo", "--keep", "--db", db}, "--keep applies to the temporary database only"},
		{[]string{"demo", "-n", "ten"}, "invalid argument"},
		{[]string{"demo", "extra"}, "unknown command"},
	}
	for _, tc := range tests {
		out, err := runKeel(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("keel %v: err = %v, want it to contain %q\n%s", tc.args, err, tc.want, out)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("rejected flags created %s (stat: %v); bad input must write nothing", db, err)
	}
}
