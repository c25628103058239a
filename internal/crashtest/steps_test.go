package crashtest

import (
	"os"
	"os/exec"
	"testing"

	"github.com/keelq/keel/internal/chaos"
	"github.com/keelq/keel/internal/testdb"
)

// killedInStep is the kill-in-step scenario of internal/chaos, the one
// keel chaos runs: a handler with three durable steps whose worker process
// is SIGKILLed during step 3. Another worker process rescues each task once
// its lease expired; steps 1 and 2 do not run again (their side effects
// happened once), step 3 runs a second time, the task succeeds with the
// result built from the stored steps, and Get shows the three steps (1 and
// 2 stored by attempt 1, 3 by attempt 2) and one lease_expired entry of
// the killed worker.
func killedInStep(t *testing.T, b *backend) { runChaos(t, b, "kill-in-step") }

// runChaos runs scenarios of internal/chaos against b's test server (in
// a schema, database or file of their own) and fails the test on any
// failure. Its worker processes are this test binary re-executed, which
// TestMain turns into chaos workers.
func runChaos(t *testing.T, b *backend, scenarios ...string) {
	t.Helper()
	var dsn string
	switch b {
	case sqliteBackend:
		dsn = testdb.SQLiteFile(t)
	case postgresBackend:
		testdb.Require(t, testdb.Postgres)
		dsn = testdb.PostgresDSN()
	case mariadbBackend:
		testdb.Require(t, testdb.MySQL)
		dsn = testdb.MySQLDSN()
	default:
		t.Fatalf("no chaos DSN for %s", b.name)
	}
	rep, err := chaos.Run(t.Context(), chaos.Options{DSN: dsn, Scenarios: scenarios, Log: t.Logf,
		Command: func() *exec.Cmd { return exec.Command(os.Args[0]) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != len(scenarios) {
		t.Fatalf("%d results for %d scenarios: %+v", len(rep.Results), len(scenarios), rep.Results)
	}
	for _, r := range rep.Results {
		if r.Status != chaos.StatusPass || r.Tasks == 0 || r.Succeeded != r.Tasks {
			t.Errorf("%s: %s, %d of %d tasks succeeded: %v %s", r.Scenario, r.Status, r.Succeeded, r.Tasks, r.Failures, r.Reason)
		}
	}
}
