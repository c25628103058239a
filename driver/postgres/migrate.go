package postgres

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one schema version and whether this call applied it.
type Migration = driver.Migration

// Migrate applies every embedded migration not yet applied. Concurrent
// migrators serialise on an advisory lock.
func (d *Driver) Migrate(ctx context.Context) error {
	_, err := d.Migrations(ctx)
	return err
}

// Migrations applies pending migrations and reports every known version.
func (d *Driver) Migrations(ctx context.Context) ([]Migration, error) {
	ms, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(ms))
	err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "keel-migrate:"+d.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, d.q(`CREATE SCHEMA IF NOT EXISTS {schema};
			CREATE TABLE IF NOT EXISTS {schema}.keel_migrations (
				version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)); err != nil {
			return err
		}
		for _, m := range ms {
			var at []time.Time
			err := pgxQuerier{db: tx}.query(ctx, d.q(`SELECT applied_at FROM {schema}.keel_migrations WHERE version = $1`),
				[]any{m.Version}, func(scan func(...any) error) error {
					var t time.Time
					at = append(at, t)
					return scan(&at[len(at)-1])
				})
			if err != nil {
				return err
			}
			if len(at) > 0 {
				out = append(out, Migration{Version: m.Version, Name: m.Name, AppliedAt: at[0].UTC()})
				continue
			}
			if _, err := tx.Exec(ctx, d.q(m.SQL)); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, d.q(`INSERT INTO {schema}.keel_migrations (version, name) VALUES ($1, $2)`), m.Version, m.Name); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			out = append(out, Migration{Version: m.Version, Name: m.Name, Applied: true, AppliedAt: time.Now().UTC()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	return out, nil
}
