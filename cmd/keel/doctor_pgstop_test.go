package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/internal/testdb"
)

// TestDoctorPostgresStopped: doctor on a private PostgreSQL, migrated and
// with a live node, is all ok; after the server stops, the database line
// fails, says so, and doctor exits non-zero.
func TestDoctorPostgresStopped(t *testing.T) {
	t.Parallel()
	pg := testdb.PrivatePostgres(t)
	if out, err := runKeel(t, "migrate", "--dsn", pg.DSN); err != nil {
		t.Fatalf("keel migrate: %v\n%s", err, out)
	}
	drv, err := postgres.Open(context.Background(), pg.DSN, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	registerNode(t, drv, "alive-1", time.Now())
	drv.Close()
	rs, out, err := doctorLines(t, "--dsn", pg.DSN)
	if err != nil {
		t.Fatalf("healthy private PostgreSQL: %v\n%s", err, out)
	}
	allOK(t, rs, out)
	wantStatus(t, rs, "database", statusOK, "PostgreSQL schema keel", "round trip")
	wantStatus(t, rs, "migrations", statusOK)
	wantStatus(t, rs, "database connections", statusOK)

	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	rs, out, err = doctorLines(t, "--dsn", pg.DSN)
	if err == nil || !strings.Contains(err.Error(), "1 of 1 checks failed") {
		t.Fatalf("PostgreSQL stopped: want a failure, got %v\n%s", err, out)
	}
	wantStatus(t, rs, "database", statusFail, "connect to PostgreSQL", "connection refused")
	if h := rs["database"].Hint; !strings.Contains(h, "database server runs") {
		t.Errorf("database hint %q", h)
	}
	// The command's exit status: main turns the error into a non-zero one.
	text, err := runKeel(t, "doctor", "--dsn", pg.DSN)
	if err == nil || !strings.HasPrefix(text, "FAIL  database") {
		t.Errorf("table output (%v):\n%s", err, text)
	}
}
