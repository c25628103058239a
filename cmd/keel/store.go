package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
)

// isPostgresDSN reports whether dsn names a PostgreSQL database.
func isPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// isMySQLDSN reports whether dsn names a MySQL or MariaDB database.
func isMySQLDSN(dsn string) bool { return strings.HasPrefix(dsn, "mysql://") }

// openStore opens the database dsn names, applying its migrations:
// PostgreSQL (tables in schema) for postgres://, MySQL/MariaDB for
// mysql://, else the SQLite file at dsn. where describes it for messages.
func openStore(ctx context.Context, dsn, schema string) (drv driver.Driver, where string, err error) {
	switch {
	case isPostgresDSN(dsn):
		drv, err = postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
		where = "PostgreSQL schema " + schema
	case isMySQLDSN(dsn):
		drv, err = mysql.Open(ctx, dsn, mysql.Options{})
		where = "MySQL/MariaDB"
	default:
		drv, err = sqlite.Open(ctx, dsn, sqlite.Options{})
		where = "SQLite " + dsn
	}
	return drv, where, err
}

// openFresh opens a server database emptied for a benchmark or the demo:
// on PostgreSQL the schema named space is dropped and created anew, on
// MySQL the database named space.
func openFresh(ctx context.Context, dsn, space string) (driver.Driver, error) {
	switch {
	case isPostgresDSN(dsn):
		return openFreshPostgres(ctx, dsn, space)
	case isMySQLDSN(dsn):
		return openFreshMySQL(ctx, dsn, space)
	}
	return nil, fmt.Errorf("--dsn must be a postgres:// or mysql:// URL, got %q", dsn)
}

// openFreshPostgres drops schema, then opens the driver on it (which
// creates it anew).
func openFreshPostgres(ctx context.Context, dsn, schema string) (*postgres.Driver, error) {
	if !validDatabaseName(schema) || schema[0] >= '0' && schema[0] <= '9' {
		return nil, fmt.Errorf("invalid schema name %q: use 1-63 lower-case letters, digits and '_', not starting with a digit", schema)
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

// openFreshMySQL drops and creates the database name on the server of dsn,
// then opens the driver on it.
func openFreshMySQL(ctx context.Context, dsn, name string) (*mysql.Driver, error) {
	if !validDatabaseName(name) {
		return nil, fmt.Errorf("invalid database name %q: use 1-64 lower-case letters, digits and '_'", name)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	for _, stmt := range []string{"DROP DATABASE IF EXISTS `" + name + "`", "CREATE DATABASE `" + name + "`"} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("prepare database %s: %w", name, err)
		}
	}
	cfg.DBName = name
	return mysql.Open(ctx, cfg.FormatDSN(), mysql.Options{})
}

func validDatabaseName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// serverName names the kind of server dsn points at, for messages.
func serverName(dsn string) string {
	if isMySQLDSN(dsn) {
		return "MySQL/MariaDB"
	}
	return "PostgreSQL"
}
