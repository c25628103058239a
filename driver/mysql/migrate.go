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
	"github.com/keelq/keel/internal/migrate"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one schema version and whether this call applied it.
type Migration = driver.Migration

// Migrate applies every embedded migration not yet applied. Concurrent
// migrators serialise on a named lock (GET_LOCK).
func (d *Driver) Migrate(ctx context.Context) error {
	_, err := d.Migrations(ctx)
	return err
}

// Migrations applies pending migrations and reports every known version.
// MySQL commits DDL at once, so a migration is applied statement by
// statement and recorded after its last statement.
func (d *Driver) Migrations(ctx context.Context) (_ []Migration, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("mysql: migrate: %w", err)
		}
	}()
	ms, err := migrate.Load(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var dbName string
	if err := conn.QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&dbName); err != nil {
		return nil, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(?, 60)`, "keel-migrate:"+dbName).Scan(&got); err != nil {
		return nil, err
	}
	if got.Int64 != 1 {
		return nil, errors.New("timed out waiting for another migrator's lock")
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT RELEASE_LOCK(?)`, "keel-migrate:"+dbName) //nolint:errcheck // closing the connection releases it too
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS keel_migrations (
		version INT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL, applied_at DATETIME(6) NOT NULL)`); err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(ms))
	for _, m := range ms {
		var at time.Time
		err := conn.QueryRowContext(ctx, `SELECT applied_at FROM keel_migrations WHERE version = ?`, m.Version).Scan(&at)
		if err == nil {
			out = append(out, Migration{Version: m.Version, Name: m.Name, AppliedAt: at.UTC()})
			continue
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		for _, stmt := range statements(m.SQL) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return nil, fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		now := time.Now().UTC()
		if _, err := conn.ExecContext(ctx, `INSERT INTO keel_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, now); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		out = append(out, Migration{Version: m.Version, Name: m.Name, Applied: true, AppliedAt: now})
	}
	return out, nil
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
