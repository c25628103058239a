package postgres

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/testdb"
)

// TestTerminatedConnectionIsUnavailable: a session the server ends (as a
// shutdown does: SQLSTATE 57P01 admin_shutdown) fails the driver's
// statements with driver.ErrUnavailable, the server's error still
// visible; an answer from the server stays as it is.
func TestTerminatedConnectionIsUnavailable(t *testing.T) {
	t.Parallel()
	testdb.Require(t, testdb.Postgres)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, testdb.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid int32
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	_, err = pgxQuerier{db: conn}.exec(ctx, `SELECT 1`, nil)
	if !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("a statement on a terminated session: %v, want driver.ErrUnavailable", err)
	}
	_, err = pgxQuerier{db: pool}.exec(ctx, `SELECT * FROM no_such_table`, nil)
	var pgErr *pgconn.PgError
	if errors.Is(err, driver.ErrUnavailable) || !errors.As(err, &pgErr) || pgErr.Code != "42P01" {
		t.Fatalf("a statement the server refused: %v, want its own error 42P01", err)
	}
}
