package mysql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/internal/sqlutil"
	"github.com/keelq/keel/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one schema version and whether this call applied it.
type Migration = driver.Migration

// Migrations applies pending migrations and reports every known version.
// Migrate applies them alone. Concurrent migrators serialise on a named
// lock (GET_LOCK). MySQL commits DDL at once, so a migration is applied
// statement by statement and recorded after its last statement.
func (d *Driver) Migrations(ctx context.Context) (_ []Migration, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("mysql: migrate: %w", err)
		}
	}()
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var dbName string
	if err := conn.QueryRowContext(ctx, sqlDatabase).Scan(&dbName); err != nil {
		return nil, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, sqlMigrateLock, "keel-migrate:"+dbName).Scan(&got); err != nil {
		return nil, err
	}
	if got.Int64 != 1 {
		return nil, errors.New("timed out waiting for another migrator's lock")
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), sqlMigrateUnlock, "keel-migrate:"+dbName) //nolint:errcheck // closing the connection releases it too
	if _, err := conn.ExecContext(ctx, sqlMigrationsTable); err != nil {
		return nil, err
	}
	return sqlutil.Migrate(ctx, migrationFS, "migrations", migrator{conn})
}

// migrator applies migrations on the connection that holds the lock.
type migrator struct{ conn *sql.Conn }

func (m migrator) AppliedAt(ctx context.Context, version int) (time.Time, bool, error) {
	return sqlutil.MigratedAt(sqlutil.Query(ctx, m.conn, sqlMigrationAt, version), sqlutil.UTC)
}

func (m migrator) Apply(ctx context.Context, mig migrate.Migration) (bool, time.Time, error) {
	for _, stmt := range statements(mig.SQL) {
		if _, err := m.conn.ExecContext(ctx, stmt); err != nil {
			return false, time.Time{}, err
		}
	}
	now := time.Now().UTC()
	if _, err := m.conn.ExecContext(ctx, sqlMigrationRecord, mig.Version, mig.Name, now); err != nil {
		return false, time.Time{}, err
	}
	return true, now, nil
}

// statements splits a migration file into its statements: each ends with
// ";" at the end of a line. Comment-only lines are dropped.
func statements(file string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.Lines(file) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
