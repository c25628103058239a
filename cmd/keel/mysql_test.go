package main

import (
	"strings"
	"testing"

	"github.com/keelq/keel/internal/testdb"
)

// testMySQL returns a fresh database on the MariaDB/MySQL test server
// (internal/testdb), dropped when the test ends, with the keel command's
// mysql:// URLs for the server's own database and for the fresh one.
func testMySQL(t *testing.T) (name, serverURL, dbURL string) {
	name, dsn := testdb.MySQLDatabase(t, "keel_cmd")
	return name, testdb.MySQLURL(t, testdb.MySQLDSN()), testdb.MySQLURL(t, dsn)
}

func TestBenchDemoMigrateOnMySQL(t *testing.T) {
	t.Parallel()
	name, server, dbURL := testMySQL(t)
	out, err := runKeel(t, "bench", "-n", "1000", "--dsn", server, "--schema", name)
	if err != nil || !strings.Contains(out, "succeeded in database: 1000") {
		t.Fatalf("keel bench on MySQL: %v\n%s", err, out)
	}
	out, err = runKeel(t, "demo", "-n", "40", "--seed", "5", "--dsn", server, "--schema", name, "--deadline", "45s")
	if err != nil || !strings.Contains(out, "checks:") || strings.Contains(out, "\n  FAIL  ") {
		t.Fatalf("keel demo on MySQL: %v\n%s", err, out)
	}
	out, err = runKeel(t, "migrate", "--dsn", dbURL)
	if err != nil || !strings.Contains(out, "001_create_tasks.sql") {
		t.Fatalf("keel migrate on MySQL: %v\n%s", err, out)
	}
	if _, err := runKeel(t, "bench", "-n", "10", "--dsn", server, "--schema", "Bad-Name"); err == nil {
		t.Fatal("a bad database name was accepted")
	}
}
