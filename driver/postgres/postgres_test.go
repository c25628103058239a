package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/drivertest"
	"github.com/keelq/keel/driver/postgres"
)

// testDSN is the test database; KEEL_TEST_POSTGRES overrides it.
func testDSN() string {
	if dsn := os.Getenv("KEEL_TEST_POSTGRES"); dsn != "" {
		return dsn
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// pool is shared by every test; each test has its own schema.
var pool *pgxpool.Pool

func TestMain(m *testing.M) {
	cfg, err := pgxpool.ParseConfig(testDSN())
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests:", err)
		os.Exit(1)
	}
	cfg.MaxConns = 40
	pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	if err == nil {
		err = pool.Ping(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests need PostgreSQL at", testDSN(), "(start it, or set KEEL_TEST_POSTGRES):", err)
		os.Exit(1)
	}
	code := m.Run()
	pool.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// open returns a driver on a fresh schema, dropped when the test ends.
func open(t *testing.T, opts postgres.Options) *postgres.Driver {
	t.Helper()
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	if opts.Schema == "" {
		opts.Schema = "keel_test_" + hex.EncodeToString(b[:])
	}
	ctx := context.Background()
	d, err := postgres.New(ctx, pool, opts)
	if err != nil {
		t.Fatalf("open schema %s: %v", opts.Schema, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if _, err := pool.Exec(ctx, `DROP SCHEMA `+opts.Schema+` CASCADE`); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	return d
}

func TestConformance(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, func(t *testing.T) driver.Driver { return open(t, postgres.Options{CallerClock: true}) })
}
