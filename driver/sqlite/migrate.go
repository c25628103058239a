package sqlite

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
	"github.com/keelq/keel/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one schema version and whether this call applied it.
type Migration = driver.Migration

// Migrations applies pending migrations, each in its own transaction, and
// reports every known version; Migrate applies them alone. It is safe to
// run from several processes at once.
func (d *Driver) Migrations(ctx context.Context) ([]Migration, error) {
	// In a BEGIN IMMEDIATE transaction (the writer's _txlock), like each
	// migration: it waits for the write lock with the busy timeout while
	// another process migrates.
	if err := (migrator{d}).create(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	out, err := sqlutil.Migrate(ctx, migrationFS, "migrations", migrator{d})
	if err != nil {
		return nil, fmt.Errorf("migrate %w", err)
	}
	return out, nil
}

// migrator applies one migration per BEGIN IMMEDIATE transaction: one
// migrator at a time.
type migrator struct{ d *Driver }

// create creates the migrations table if it is missing.
func (m migrator) create(ctx context.Context) error {
	tx, err := m.d.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if _, err := tx.ExecContext(ctx, sqlMigrationsTable); err != nil {
		return err
	}
	return tx.Commit()
}

func (m migrator) AppliedAt(ctx context.Context, version int) (time.Time, bool, error) {
	return migrationAt(ctx, m.d.wdb, version)
}

func (m migrator) Apply(ctx context.Context, mig migrate.Migration) (bool, time.Time, error) {
	tx, err := m.d.wdb.BeginTx(ctx, nil)
	if err != nil {
		return false, time.Time{}, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if at, ok, err := migrationAt(ctx, tx, mig.Version); err != nil || ok {
		return false, at, err
	}
	if _, err := tx.ExecContext(ctx, mig.SQL); err != nil {
		return false, time.Time{}, err
	}
	at := micros(m.d.now())
	if _, err := tx.ExecContext(ctx, sqlMigrationRecord, mig.Version, mig.Name, at); err != nil {
		return false, time.Time{}, err
	}
	return true, fromMicros(at), tx.Commit()
}

// migrationAt reads when version was applied.
func migrationAt(ctx context.Context, q querier, version int) (time.Time, bool, error) {
	return sqlutil.MigratedAt(sqlutil.Query(ctx, q, sqlMigrationAt, version), fromMicros)
}
