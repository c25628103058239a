package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/keelq/keel/internal/chaos"
)

// TestChaosSQLite runs the real keel binary: keel chaos --scenario all on
// SQLite passes, skips only the cut, leaves nothing beside the keel file,
// and records the run, which keel doctor shows; before it, keel doctor
// names the command.
func TestChaosSQLite(t *testing.T) {
	t.Parallel()
	bin := buildKeel(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "keel.db")
	keel := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = cleanEnv()
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	if _, e, err := keel("migrate", "--dsn", db); err != nil {
		t.Fatalf("keel migrate: %v\n%s", err, e)
	}
	before := dirNames(t, dir)
	out, _, _ := keel("doctor", "--db", db)
	if !strings.Contains(out, "no keel chaos run recorded") || !strings.Contains(out, "keel chaos --db "+db) {
		t.Errorf("keel doctor before a run does not name keel chaos:\n%s", out)
	}

	out, errOut, err := keel("chaos", "--db", db, "--scenario", "all", "--json")
	if err != nil {
		t.Fatalf("keel chaos: %v\n%s\n%s", err, out, errOut)
	}
	var rep chaos.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("keel chaos --json: %v\n%s", err, out)
	}
	if rep.Verdict != chaos.StatusPass || rep.Database != chaos.SQLite || len(rep.Results) != len(chaos.Scenarios()) {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Results {
		t.Logf("%s %s: %d tasks, %d rescued, rescue %v, stop %v, in %v %s", r.Scenario, r.Status, r.Tasks, r.Rescued,
			r.RescueTime, r.StopTime, r.Elapsed, strings.Join(r.Notes, "; "))
		if (r.Scenario == "cut") != (r.Status == chaos.StatusSkip) || r.Status == chaos.StatusFail {
			t.Errorf("%s: %s %v", r.Scenario, r.Status, r.Failures)
		}
	}
	if !strings.Contains(errOut, "recorded in keel_meta of SQLite "+db) {
		t.Errorf("stderr does not say where the run was recorded:\n%s", errOut)
	}
	if after := dirNames(t, dir); !slices.Equal(after, before) {
		t.Errorf("files beside keel.db: %v before the run, %v after", before, after)
	}
	out, _, _ = keel("doctor", "--db", db)
	if !strings.Contains(out, "OK    chaos") || !strings.Contains(out, "on sqlite) passed: 5 scenarios, cut skipped") {
		t.Errorf("keel doctor after the run:\n%s", out)
	}

	// The table form, one scenario.
	out, _, err = keel("chaos", "--db", db, "--scenario", "kill-in-step")
	if err != nil || !strings.Contains(out, "SCENARIO") || !strings.Contains(out, "kill-in-step  PASS") || !strings.Contains(out, "keel chaos on sqlite: PASS") {
		t.Errorf("keel chaos --scenario kill-in-step (%v):\n%s", err, out)
	}
}

// TestChaosBadFlags: bad flags give a clear error, exit 1, and write
// nothing.
func TestChaosBadFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "keel.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"chaos"}, "give --dsn"},
		{[]string{"chaos", "--db", db, "--dsn", "postgres://x/y"}, "not both"},
		{[]string{"chaos", "--dsn", db}, "--dsn must be a postgres:// or mysql:// URL"},
		{[]string{"chaos", "--db", "postgres://x/y"}, "use --dsn"},
		{[]string{"chaos", "--db", filepath.Join(dir, "no", "keel.db")}, "does not exist"},
		{[]string{"chaos", "--db", db, "--scenario", "kill-worker,bogus"}, `--scenario: unknown scenario "bogus"`},
		{[]string{"chaos", "--db", db, "--workers", "0"}, "--workers 0"},
		{[]string{"chaos", "--db", db, "--workers", "17"}, "--workers: workers 17"},
		{[]string{"chaos", "--db", db, "--duration", "1s"}, "--duration: duration 1s"},
		{[]string{"chaos", "--db", db, "--duration", "soon"}, "invalid argument"},
	} {
		out, err := runKeel(t, c.args...)
		if err == nil || !strings.Contains(err.Error()+out, c.want) {
			t.Errorf("keel %s: error %v, output %q; want %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("bad flags wrote %v", names)
	}
}

// dirNames lists a directory.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
