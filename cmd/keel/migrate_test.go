package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMigrateReportsVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	var first, second bytes.Buffer
	if err := runMigrate(context.Background(), &first, migrateOptions{dsn: path}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first.String(), "001_create_tasks.sql") || !strings.Contains(first.String(), "(applied now)") {
		t.Fatalf("first run did not report applying the migrations:\n%s", first.String())
	}
	time.Sleep(2 * time.Millisecond)
	if err := runMigrate(context.Background(), &second, migrateOptions{dsn: path}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(second.String(), "001_create_tasks.sql") || strings.Contains(second.String(), "applied now") {
		t.Fatalf("second run should report the versions as already applied:\n%s", second.String())
	}
}

func TestMigrateNeedsDSN(t *testing.T) {
	t.Setenv("KEEL_DSN", "")
	if err := runMigrate(context.Background(), &bytes.Buffer{}, migrateOptions{}); err == nil || !strings.Contains(err.Error(), "--dsn") {
		t.Fatalf("missing DSN: %v", err)
	}
	if err := runMigrate(context.Background(), &bytes.Buffer{}, migrateOptions{dsn: "postgres://127.0.0.1:5432/test", schema: "Bad;"}); err == nil {
		t.Fatal("bad schema accepted")
	}
}
