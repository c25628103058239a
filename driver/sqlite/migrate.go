package sqlite

import (
	"context"
	"embed"
	"fmt"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one schema version and whether this call applied it.
type Migration = driver.Migration

// Migrate applies every embedded migration not yet applied, each in its own
// transaction, and is safe to run from several processes at once.
func (d *Driver) Migrate(ctx context.Context) error {
	_, err := d.migrate(ctx)
	return err
}

// Migrations applies pending migrations and reports every known version.
func (d *Driver) Migrations(ctx context.Context) ([]Migration, error) {
	return d.migrate(ctx)
}

func (d *Driver) migrate(ctx context.Context) ([]Migration, error) {
	ms, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	if _, err := d.wdb.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS keel_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	out := make([]Migration, 0, len(ms))
	for _, m := range ms {
		applied, err := d.applyMigration(ctx, m)
		if err != nil {
			return nil, err
		}
		var at int64
		if err := d.wdb.QueryRowContext(ctx, `SELECT applied_at FROM keel_migrations WHERE version = ?`, m.Version).Scan(&at); err != nil {
			return nil, fmt.Errorf("migrate: %w", err)
		}
		out = append(out, Migration{Version: m.Version, Name: m.Name, Applied: applied, AppliedAt: fromMicros(at)})
	}
	return out, nil
}

// applyMigration applies m unless present and reports whether it was new.
func (d *Driver) applyMigration(ctx context.Context, m migrate.Migration) (bool, error) {
	tx, err := d.wdb.BeginTx(ctx, nil) // BEGIN IMMEDIATE: one migrator at a time
	if err != nil {
		return false, fmt.Errorf("migrate %s: %w", m.Name, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM keel_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return false, fmt.Errorf("migrate %s: %w", m.Name, err)
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return false, fmt.Errorf("migrate %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO keel_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, micros(d.now())); err != nil {
		return false, fmt.Errorf("migrate %s: %w", m.Name, err)
	}
	return true, tx.Commit()
}
