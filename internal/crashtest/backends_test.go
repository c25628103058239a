package crashtest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/internal/testdb"
)

// backends are the databases the scenarios run against, by the name a
// helper process is told.
var backends = map[string]*backend{
	sqliteBackend.name:   sqliteBackend,
	postgresBackend.name: postgresBackend,
	mariadbBackend.name:  mariadbBackend,
}

func TestSQLite(t *testing.T)   { run(t, sqliteBackend) }
func TestPostgres(t *testing.T) { run(t, postgresBackend) }
func TestMariaDB(t *testing.T)  { run(t, mariadbBackend) }

// sameRebind leaves ? placeholders as they are.
func sameRebind(q string) string { return q }

var sqliteBackend = &backend{
	name: "sqlite",
	create: func(t *testing.T) target {
		return target{DSN: testdb.SQLiteFile(t)}
	},
	open: func(ctx context.Context, tg target, _ string, _ int) (driver.Driver, *sql.DB, func(), error) {
		drv, err := sqlite.Open(ctx, tg.DSN, sqlite.Options{})
		if err != nil {
			return nil, nil, nil, err
		}
		return drv, drv.DB(), func() { drv.Close() }, nil
	},
	rebind:     sameRebind,
	timeArg:    func(t time.Time) any { return t.UnixMicro() },
	effectsDDL: `CREATE TABLE effects (task_id INTEGER NOT NULL, node TEXT NOT NULL, attempt INTEGER NOT NULL)`,
	// Worker processes share SQLite's one write lock. They take turns at
	// it (driver/sqlite's gate), so the three processes of leader failover
	// keep their 2s leases; before the turns, about one run in six, a live
	// worker's heartbeat waited out its lease on a loaded machine. The
	// killed-worker scenario still runs one worker at a time (the killed
	// one, then its restart): with three, a claim waiting its turn is
	// stamped with the time it was asked for, which can come before the
	// rescue that committed ahead of it, and the scenario's ordering check
	// reads the stamps.
	// Every task commits its own write transaction (the handler's
	// effect and CompleteTx), fsynced, under the one write lock: about
	// 60 a second for three processes under -race, so fewer tasks keep
	// the scenario under a minute.
	brakeTasks: 2000,
	// The same for the batch scenario's members.
	batchTasks: 2000,
}

var postgresBackend = &backend{
	name: "postgres",
	create: func(t *testing.T) target {
		return target{DSN: testdb.PostgresDSN(), Schema: testdb.PostgresSchema(t, "keel_crash")}
	},
	open: func(ctx context.Context, tg target, app string, conns int) (driver.Driver, *sql.DB, func(), error) {
		u, err := url.Parse(tg.DSN)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("parse %s: %w", tg.DSN, err)
		}
		q := u.Query()
		q.Set("application_name", app)
		q.Set("pool_max_conns", strconv.Itoa(conns))
		q.Set("search_path", tg.Schema) // the effects table, unqualified
		u.RawQuery = q.Encode()
		pool, err := pgxpool.New(ctx, u.String())
		if err != nil {
			return nil, nil, nil, err
		}
		drv, err := postgres.New(ctx, pool, postgres.Options{Schema: tg.Schema})
		if err != nil {
			pool.Close()
			return nil, nil, nil, err
		}
		return drv, drv.DB(), func() { drv.Close(); pool.Close() }, nil
	},
	rebind: func(q string) string {
		var b strings.Builder
		n := 0
		for _, r := range q {
			if r == '?' {
				n++
				fmt.Fprintf(&b, "$%d", n)
				continue
			}
			b.WriteRune(r)
		}
		return b.String()
	},
	timeArg:    func(t time.Time) any { return t },
	effectsDDL: `CREATE TABLE effects (task_id bigint NOT NULL, node text NOT NULL, attempt integer NOT NULL)`,
	brakeTasks: 5000,
	batchTasks: 5000,
	terminate: func(e *env, app string) (int64, error) {
		var n int64
		err := e.db.QueryRowContext(e.ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()) k`, app).Scan(&n)
		return n, err
	},
}

var mariadbBackend = &backend{
	name: "mariadb",
	create: func(t *testing.T) target {
		_, dsn := testdb.MySQLDatabase(t, "keel_crash")
		return target{DSN: dsn}
	},
	open: func(ctx context.Context, tg target, _ string, conns int) (driver.Driver, *sql.DB, func(), error) {
		drv, err := mysql.Open(ctx, tg.DSN, mysql.Options{MaxConns: conns})
		if err != nil {
			return nil, nil, nil, err
		}
		return drv, drv.DB(), func() { drv.Close() }, nil
	},
	rebind:  sameRebind,
	timeArg: func(t time.Time) any { return t.UTC() },
	effectsDDL: `CREATE TABLE effects (task_id BIGINT NOT NULL, node VARCHAR(255) NOT NULL,
		attempt INT NOT NULL, KEY (task_id)) ENGINE = InnoDB`,
	brakeTasks: 5000,
	batchTasks: 5000,
}
