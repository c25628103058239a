package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelq/keel/internal/testdb"
)

func TestMain(m *testing.M) {
	if IsWorker() {
		// This test binary re-executed as a worker process.
		if err := WorkerMain(); err != nil {
			fmt.Fprintln(os.Stderr, "chaos worker:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// testCommand re-executes this test binary, which TestMain turns into a
// worker process.
func testCommand() *exec.Cmd { return exec.Command(os.Args[0]) }

// runAll runs every scenario against dsn and fails the test on any
// failure; it returns the report.
func runAll(t *testing.T, dsn string, scenarios ...string) *Report {
	t.Helper()
	rep, err := Run(t.Context(), Options{DSN: dsn, Scenarios: scenarios, Command: testCommand, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		t.Logf("%s: %s tasks %d succeeded %d lost %d twice %d stuck %d rescued %d rescue %v takeover %v recovery %v stop %v in %v %s %v",
			r.Scenario, r.Status, r.Tasks, r.Succeeded, r.Lost, r.Twice, r.Stuck, r.Rescued, r.RescueTime.String(),
			r.TakeoverTime.String(), r.RecoveryTime.String(), r.StopTime.String(), r.Elapsed.String(), r.Reason, r.Failures)
		if r.Status == StatusFail {
			t.Errorf("%s failed: %v", r.Scenario, r.Failures)
		}
		if r.Status == StatusPass && (r.Succeeded != r.Tasks || r.Tasks == 0) {
			t.Errorf("%s passed with %d of %d tasks succeeded", r.Scenario, r.Succeeded, r.Tasks)
		}
	}
	if want := max(len(scenarios), len(Scenarios())*boolInt(len(scenarios) == 0)); len(rep.Results) != want {
		t.Errorf("%d results, want %d", len(rep.Results), want)
	}
	return rep
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (d Duration) String() string { return time.Duration(d).Round(time.Millisecond).String() }

// TestSQLite runs every scenario on a SQLite file beside the test's own,
// which stays untouched; the cut does not apply; nothing is left behind.
func TestSQLite(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "keel.db")
	if err := os.WriteFile(mine, []byte("not touched"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := runAll(t, mine)
	for _, r := range rep.Results {
		if (r.Scenario == "cut") != (r.Status == StatusSkip) {
			t.Errorf("%s: status %s; on SQLite only the cut is skipped", r.Scenario, r.Status)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"keel.db"}) {
		t.Errorf("the directory holds %v after the run, want only keel.db", names)
	}
	if b, _ := os.ReadFile(mine); string(b) != "not touched" {
		t.Errorf("keel.db now holds %q", b)
	}
}

func TestPostgres(t *testing.T) {
	testdb.Require(t, testdb.Postgres)
	runAll(t, testdb.PostgresDSN())
}

func TestMariaDB(t *testing.T) {
	testdb.Require(t, testdb.MySQL)
	runAll(t, testdb.MySQLDSN())
}
