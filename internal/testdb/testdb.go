// Package testdb gives each test its own database: a PostgreSQL schema, a
// MariaDB/MySQL database or a SQLite file, created fresh and dropped when the
// test ends, so tests run in parallel on one server.
//
// The servers are read once from the environment:
//   - KEEL_TEST_POSTGRES, a URL (default
//     postgres://postgres@127.0.0.1:5432/test?sslmode=disable);
//   - KEEL_TEST_MYSQL, a go-sql-driver DSN (default
//     root@tcp(127.0.0.1:3306)/test).
//
// Require skips a test that needs a service (those databases, Redis,
// RabbitMQ, NATS, Chromium) when it cannot be reached, with one line saying
// how to enable it; under CI=true it fails the test instead. The other
// services are read from KEEL_TEST_REDIS, KEEL_TEST_RABBITMQ, KEEL_TEST_NATS
// and KEEL_TEST_CHROMIUM.
//
// It is for tests only: no package but a _test.go file or another test
// helper package (internal/*test) may import it.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// The environment variables that name the test servers.
const (
	EnvPostgres = "KEEL_TEST_POSTGRES"
	EnvMySQL    = "KEEL_TEST_MYSQL"
)

var (
	postgresDSN = sync.OnceValue(func() string { return envOr(EnvPostgres, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable") })
	mysqlDSN    = sync.OnceValue(func() string { return envOr(EnvMySQL, "root@tcp(127.0.0.1:3306)/test") })
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// PostgresDSN is the PostgreSQL test database as a URL: KEEL_TEST_POSTGRES,
// or postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
func PostgresDSN() string { return postgresDSN() }

// MySQLDSN is the MariaDB/MySQL test server as a go-sql-driver DSN:
// KEEL_TEST_MYSQL, or root@tcp(127.0.0.1:3306)/test.
func MySQLDSN() string { return mysqlDSN() }

// prefixRE is what a name prefix may be: it becomes part of an identifier.
var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,49}$`)

// uniqueName returns prefix_<12 random hex digits>.
func uniqueName(t testing.TB, prefix string) string {
	t.Helper()
	if !prefixRE.MatchString(prefix) {
		t.Fatalf("testdb: name prefix %q: want lower-case letters, digits and _", prefix)
	}
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return prefix + "_" + hex.EncodeToString(b[:])
}

// cleanupTimeout bounds the drop at the end of a test.
const cleanupTimeout = 30 * time.Second

// PostgresSchema creates a schema named prefix_<random> in the PostgreSQL
// test database and drops it (CASCADE) when the test ends, on a connection
// of its own, so the test may close its drivers and pools first. When the
// server cannot be reached it skips the test (fails it under CI=true).
func PostgresSchema(t testing.TB, prefix string) string {
	t.Helper()
	Require(t, Postgres)
	schema := uniqueName(t, prefix)
	exec := func(ctx context.Context, stmt string) error {
		conn, err := pgx.Connect(ctx, PostgresDSN())
		if err != nil {
			return fmt.Errorf("connect to PostgreSQL at %s (start it, or set %s): %w", PostgresDSN(), EnvPostgres, err)
		}
		defer conn.Close(context.Background()) //nolint:errcheck // the statement's error is what matters
		_, err = conn.Exec(ctx, stmt)
		return err
	}
	if err := exec(t.Context(), `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("testdb: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
			t.Errorf("testdb: drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// MySQLDatabase creates a database named prefix_<random> on the
// MariaDB/MySQL test server and drops it when the test ends. It returns the
// name and a go-sql-driver DSN for it (the server's DSN with its database
// replaced). When the server cannot be reached it skips the test (fails it
// under CI=true).
func MySQLDatabase(t testing.TB, prefix string) (name, dsn string) {
	t.Helper()
	Require(t, MySQL)
	name = uniqueName(t, prefix)
	cfg, err := gomysql.ParseDSN(MySQLDSN())
	if err != nil {
		t.Fatalf("testdb: %s: %v", EnvMySQL, err)
	}
	exec := func(ctx context.Context, stmt string) error {
		db, err := sql.Open("mysql", MySQLDSN())
		if err != nil {
			return err
		}
		defer db.Close()
		if err := db.PingContext(ctx); err != nil {
			return fmt.Errorf("connect to MySQL or MariaDB at %s (start it, or set %s): %w", MySQLDSN(), EnvMySQL, err)
		}
		_, err = db.ExecContext(ctx, stmt)
		return err
	}
	if err := exec(t.Context(), "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatalf("testdb: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := exec(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("testdb: drop database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return name, cfg.FormatDSN()
}

// MySQLURL turns a go-sql-driver DSN over TCP into the mysql:// URL form
// the keel command takes (mysql://user:password@host:port/database).
func MySQLURL(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testdb: parse MySQL DSN: %v", err)
	}
	if cfg.Net != "tcp" {
		t.Fatalf("testdb: MySQL DSN %s: the keel command's URL form needs tcp, not %s", dsn, cfg.Net)
	}
	u := url.URL{Scheme: "mysql", Host: cfg.Addr, Path: "/" + cfg.DBName}
	if cfg.Passwd != "" {
		u.User = url.UserPassword(cfg.User, cfg.Passwd)
	} else {
		u.User = url.User(cfg.User)
	}
	return u.String()
}

// SQLiteFile returns the path of a new SQLite database file (not yet
// created) in the test's temporary directory, removed when the test ends.
func SQLiteFile(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "keel.db")
}
