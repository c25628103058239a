package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
			time.Duration(r.RescueTime), time.Duration(r.StopTime), time.Duration(r.Elapsed), strings.Join(r.Notes, "; "))
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

	// --config: the workers take its lease (5s, with 1s heartbeats), so
	// the rescue comes later than the default 2s lease allows, and the
	// work runs as its type, two at a time at most.
	cfg := filepath.Join(t.TempDir(), "keel.toml")
	if err := os.WriteFile(cfg, []byte("shutdown_timeout = \"1s\"\n[engine]\nlease_ttl = \"5s\"\nheartbeat_interval = \"1s\"\nrescue_interval = \"1s\"\n"+
		"[types.\"report.generate\"]\nqueue = \"reports\"\nconcurrency = 4\ntimeout = \"30s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, err = keel("chaos", "--db", db, "--scenario", "kill-worker", "--config", cfg, "--json")
	if err != nil {
		t.Fatalf("keel chaos --config: %v\n%s\n%s", err, out, errOut)
	}
	rep = chaos.Report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Results) != 1 {
		t.Fatalf("keel chaos --config --json (%v):\n%s", err, out)
	}
	if r := rep.Results[0]; r.Status != chaos.StatusPass || time.Duration(r.RescueTime) < 3500*time.Millisecond {
		t.Errorf("with a 5s lease: %s, rescue after %v; want a pass with the rescue 3.5s or more after the kill", r.Status, time.Duration(r.RescueTime))
	} else if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, "type report.generate: at most ") || !strings.Contains(notes, "of its 4 allowed ran at once") {
		t.Errorf("the run does not report report.generate's concurrency: %q", r.Notes)
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
		{[]string{"chaos", "--db", db, "--config", filepath.Join(dir, "none.toml")}, "none.toml"},
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
