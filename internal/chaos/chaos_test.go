package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// TestTypes runs kill-worker as a user's two types would (keel chaos
// --config): one capped at 3 running on a queue of its own, one at 20
// starts a second. It passes and reports both limits kept; with the
// limits left unstored, the same run fails on the concurrency it broke.
func TestTypes(t *testing.T) {
	types := []Type{
		{Name: "report.generate", Queue: "reports", Priority: 2, Timeout: 10 * time.Second, Concurrency: 3},
		{Name: "mail.send", Rate: 20, Burst: 5},
	}
	db := filepath.Join(t.TempDir(), "keel.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, unlimited := range []bool{false, true} {
		rep, err := Run(t.Context(), Options{DSN: db, Scenarios: []string{"kill-worker"}, Command: testCommand, Log: t.Logf,
			Types: types, unlimited: unlimited})
		if err != nil {
			t.Fatal(err)
		}
		r := rep.Results[0]
		t.Logf("unlimited %v: %s, %d tasks, %d succeeded; notes %q; failures %q", unlimited, r.Status, r.Tasks, r.Succeeded, r.Notes, r.Failures)
		notes, failures := strings.Join(r.Notes, "\n"), strings.Join(r.Failures, "\n")
		if !unlimited {
			if r.Status != StatusPass || r.Succeeded != r.Tasks {
				t.Errorf("with the limits stored: %s, %d of %d succeeded: %v", r.Status, r.Succeeded, r.Tasks, r.Failures)
			}
			for _, want := range []string{"type report.generate: at most ", "of its 3 allowed ran at once", "type mail.send: at most "} {
				if !strings.Contains(notes, want) {
					t.Errorf("the notes do not say %q: %s", want, notes)
				}
			}
			// The two types pass 40 tasks a second together (mail.send's
			// 20 sets the pace, every other task): the 300 of SQLite drain
			// in 30s, and the line after the kill is 40/s for 1.5 × (2s
			// lease + 0.5s rescue), 150 (see run.line).
			if r.Tasks != 300+150 {
				t.Errorf("%d tasks, want 450", r.Tasks)
			}
			continue
		}
		if r.Status != StatusFail || !strings.Contains(failures, "type report.generate: ") || !strings.Contains(failures, "over its concurrency of 3") {
			t.Errorf("with the limits unstored the run did not fail on report.generate's concurrency: %s %q", r.Status, r.Failures)
		}
	}
}

// TestBadTypes: a type the run cannot take is refused before anything is
// created, naming the type.
func TestBadTypes(t *testing.T) {
	for _, tc := range []struct {
		typ  Type
		want string
	}{
		{Type{Name: "bad name"}, `type "bad name": not a valid type name`},
		{Type{Name: "a", Queue: "q\x00"}, `queue "q\x00" is not a valid queue name`},
		{Type{Name: "a", Timeout: 50 * time.Millisecond}, "timeout 50ms is shorter than twice"},
		{Type{Name: "a", Concurrency: -1}, "must not be negative"},
		{Type{Name: workType}, "the name is the run's own"},
	} {
		err := Options{DSN: "x.db", Command: testCommand, Types: []Type{tc.typ}}.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.typ, err, tc.want)
		}
	}
	err := Options{DSN: "x.db", Command: testCommand, Types: []Type{{Name: "a"}, {Name: "a"}}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "type a: given twice") {
		t.Errorf("a type given twice: %v", err)
	}
}
