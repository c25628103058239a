package postgres

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
	"github.com/keelq/keel/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one schema version and whether this call applied it.
type Migration = driver.Migration

// Migrations applies pending migrations and reports every known version,
// all in one transaction; Migrate applies them alone. Concurrent migrators
// serialise on an advisory lock.
func (d *Driver) Migrations(ctx context.Context) ([]Migration, error) {
	var out []Migration
	err := beginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlMigrateLock, "keel-migrate:"+d.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, d.q(sqlMigrationsTable)); err != nil {
			return err
		}
		var err error
		out, err = sqlutil.Migrate(ctx, migrationFS, "migrations", migrator{d: d, tx: tx})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	return out, nil
}

// migrator applies migrations in the transaction that holds the lock.
type migrator struct {
	d  *Driver
	tx pgx.Tx
}

func (m migrator) AppliedAt(ctx context.Context, version int) (time.Time, bool, error) {
	return sqlutil.MigratedAt(rowsOf(ctx, pgxQuerier{db: m.tx}, m.d.q(sqlMigrationAt), version), sqlutil.UTC)
}

func (m migrator) Apply(ctx context.Context, mig migrate.Migration) (bool, time.Time, error) {
	if _, err := m.tx.Exec(ctx, m.d.q(mig.SQL)); err != nil {
		return false, time.Time{}, err
	}
	if _, err := m.tx.Exec(ctx, m.d.q(sqlMigrationRecord), mig.Version, mig.Name); err != nil {
		return false, time.Time{}, err
	}
	return true, time.Now().UTC(), nil
}
