package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/keelq/keel/driver/mysql"
)

func testMySQLDSN() string {
	if dsn := os.Getenv("KEEL_TEST_MYSQL_URL"); dsn != "" {
		return dsn
	}
	return "mysql://root@127.0.0.1:3306/test"
}

// testDatabase returns a fresh database name, dropped when the test ends.
func testDatabase(t *testing.T) string {
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	name := "keel_cmd_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		cfg, err := mysql.ParseDSN(testMySQLDSN())
		if err != nil {
			t.Errorf("drop database: %v", err)
			return
		}
		cfg.DBName = ""
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Errorf("drop database: %v", err)
			return
		}
		defer db.Close()
		if _, err := db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	return name
}

func TestBenchDemoMigrateOnMySQL(t *testing.T) {
	t.Parallel()
	name := testDatabase(t)
	out, err := runKeel(t, "bench", "-n", "1000", "--dsn", testMySQLDSN(), "--schema", name)
	if err != nil || !strings.Contains(out, "succeeded in database: 1000") {
		t.Fatalf("keel bench on MySQL: %v\n%s", err, out)
	}
	out, err = runKeel(t, "demo", "-n", "40", "--seed", "5", "--dsn", testMySQLDSN(), "--schema", name, "--deadline", "45s")
	if err != nil || !strings.Contains(out, "checks:") || strings.Contains(out, "\n  FAIL  ") {
		t.Fatalf("keel demo on MySQL: %v\n%s", err, out)
	}
	dsn := strings.TrimSuffix(testMySQLDSN(), "/test") + "/" + name
	out, err = runKeel(t, "migrate", "--dsn", dsn)
	if err != nil || !strings.Contains(out, "001_create_tasks.sql") {
		t.Fatalf("keel migrate on MySQL: %v\n%s", err, out)
	}
	if _, err := runKeel(t, "bench", "-n", "10", "--dsn", testMySQLDSN(), "--schema", "Bad-Name"); err == nil {
		t.Fatal("a bad database name was accepted")
	}
}
