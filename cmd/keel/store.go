package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
)

// isPostgresDSN reports whether dsn names a PostgreSQL database.
func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// openStore opens the database a command works on: PostgreSQL for a
// postgres:// DSN (tables in schema), otherwise the SQLite file at dsn.
func openStore(ctx context.Context, dsn, schema string) (driver.Driver, error) {
	if isPostgresDSN(dsn) {
		return postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
	}
	return sqlite.Open(ctx, strings.TrimPrefix(dsn, "sqlite://"), sqlite.Options{})
}

// openFreshPostgres drops schema, then opens the driver on it (which
// creates it anew): benchmarks start from an empty table.
func openFreshPostgres(ctx context.Context, dsn, schema string) (*postgres.Driver, error) {
	if !isPostgresDSN(dsn) {
		return nil, fmt.Errorf("--dsn must be a postgres:// URL, got %q", dsn)
	}
	cfg, err := pgxpool.ParseConfig(dsn) // accepts the pool's own DSN parameters
	if err != nil {
		return nil, fmt.Errorf("--dsn: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		return nil, fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
}
