package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/testdb"
)

// testPostgresDSN is the PostgreSQL test database (internal/testdb).
func testPostgresDSN() string { return testdb.PostgresDSN() }

// testSchema returns a fresh schema name, dropped when the test ends.
func testSchema(t *testing.T) string { return testdb.PostgresSchema(t, "keel_cmd") }

func TestDemoOnPostgres(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	out, err := runKeel(t, "demo", "-n", "60", "--seed", "3", "--dsn", testPostgresDSN(), "--schema", schema, "--deadline", "45s")
	if err != nil {
		t.Fatalf("keel demo --dsn: %v\n%s", err, out)
	}
	if !strings.Contains(out, "checks:") || strings.Contains(out, "\n  FAIL  ") {
		t.Fatalf("demo checks failed:\n%s", out)
	}
	// Read the schema independently of the demo's report.
	ctx := context.Background()
	d, err := postgres.Open(ctx, testPostgresDSN(), postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c, err := keel.NewClient(keel.Config{Driver: d, Types: demoTypes})
	if err != nil {
		t.Fatal(err)
	}
	counts, err := c.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var total, terminal int64
	for _, byState := range counts {
		for state, n := range byState {
			total += n
			if state == keel.StateSucceeded || state == keel.StateDead {
				terminal += n
			}
		}
	}
	if total != 60 || terminal != 60 {
		t.Fatalf("%d tasks, %d terminal; want 60 and 60: %v", total, terminal, counts)
	}
}

func TestBenchOnPostgres(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	out, err := runKeel(t, "bench", "-n", "2000", "--dsn", testPostgresDSN(), "--schema", schema)
	if err != nil {
		t.Fatalf("keel bench --dsn: %v\n%s", err, out)
	}
	if !strings.Contains(out, "worked 2000 tasks") || !strings.Contains(out, "succeeded in database: 2000") {
		t.Fatalf("unexpected bench output:\n%s", out)
	}
}

// TestBenchSeparateProducerOnPostgres: with an enqueue-only producer the
// workers hear of tasks by LISTEN/NOTIFY, well before their 1s poll.
func TestBenchSeparateProducerOnPostgres(t *testing.T) {
	t.Parallel()
	schema := testSchema(t)
	out, err := runKeel(t, "bench", "--duration", "2s", "--rate", "20", "--separate-producer", "--dsn", testPostgresDSN(), "--schema", schema)
	if err != nil {
		t.Fatalf("keel bench --separate-producer: %v\n%s", err, out)
	}
	if !strings.Contains(out, "worked 40;") || !strings.Contains(out, "pickup latency p50") {
		t.Fatalf("unexpected bench output:\n%s", out)
	}
	_, p50, _ := strings.Cut(out, "pickup latency p50 ")
	p50, _, _ = strings.Cut(p50, " ")
	d, err := time.ParseDuration(p50)
	if err != nil {
		t.Fatalf("parse p50 %q: %v", p50, err)
	}
	if d > 500*time.Millisecond {
		t.Fatalf("median pickup %v: the workers waited for their poll instead of the notification\n%s", d, out)
	}
}

// TestBenchRejectsBadSchemaBeforeDropping: a bad --schema is refused before
// anything is dropped or written.
func TestBenchRejectsBadSchemaBeforeDropping(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{"Bad;", "1abc", ""} {
		out, err := runKeel(t, "bench", "-n", "1", "--dsn", testPostgresDSN(), "--schema", schema)
		if err == nil || !strings.Contains(err.Error()+out, "invalid schema name") {
			t.Errorf("--schema %q: %v\n%s", schema, err, out)
		}
	}
}
