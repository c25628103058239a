package chaos

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/driver/mysql"
	"github.com/keelq/keel/driver/postgres"
	"github.com/keelq/keel/driver/sqlite"
)

// The kinds of database.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
	MariaDB  = "mariadb"
)

// Kind names the database a DSN points at: Postgres for a postgres:// or
// postgresql:// URL, MariaDB (also MySQL) for a mysql:// URL or a
// go-sql-driver DSN with @tcp( or @unix(, else SQLite (a file path).
func Kind(dsn string) string {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return Postgres
	case strings.HasPrefix(dsn, "mysql://"), strings.Contains(dsn, "@tcp("), strings.Contains(dsn, "@unix("):
		return MariaDB
	}
	return SQLite
}

// space is one scenario's private database: a SQLite file, a PostgreSQL
// schema or a MariaDB database made for it alone and dropped after it.
type space struct {
	kind   string
	dsn    string // what a worker opens: the file, or a DSN naming the database
	schema string // PostgreSQL only
	drop   func(ctx context.Context) error
}

// randomName is prefix_ and 8 random hex digits.
func randomName(prefix string) string {
	var b [4]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return prefix + "_" + hex.EncodeToString(b[:])
}

// newSpace creates a private database beside what dsn names: a new SQLite
// file in the directory of the file dsn names (which it never opens), a
// new schema in the PostgreSQL database, a new database on the MariaDB
// server. Nothing that exists is touched; drop removes what it made.
func newSpace(ctx context.Context, dsn string) (*space, error) {
	name := randomName("keel_chaos")
	switch Kind(dsn) {
	case Postgres:
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `CREATE SCHEMA `+name); err != nil {
			return nil, fmt.Errorf("create schema %s: %w", name, err)
		}
		return &space{kind: Postgres, dsn: dsn, schema: name, drop: func(ctx context.Context) error {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				return err
			}
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+name+` CASCADE`)
			return err
		}}, nil
	case MariaDB:
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		exec := func(ctx context.Context, stmt string) error {
			c := cfg.Clone()
			c.DBName = ""
			db, err := sql.Open("mysql", c.FormatDSN())
			if err != nil {
				return err
			}
			defer db.Close()
			_, err = db.ExecContext(ctx, stmt)
			return err
		}
		if err := exec(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
			return nil, fmt.Errorf("create database %s: %w", name, err)
		}
		own := cfg.Clone()
		own.DBName = name
		return &space{kind: MariaDB, dsn: own.FormatDSN(), drop: func(ctx context.Context) error {
			return exec(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
		}}, nil
	}
	dir := filepath.Dir(dsn)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the directory of %s: not a directory (%v)", dsn, err)
	}
	path := filepath.Join(dir, name+".db")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	f.Close()
	return &space{kind: SQLite, dsn: path, drop: func(context.Context) error {
		var errs []error
		for _, p := range []string{path, path + "-wal", path + "-shm", path + "-lock"} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}}, nil
}

// open opens the space's database through dsn (the space's own, or one
// rewritten to pass the proxy) with at most conns connections.
func (s *space) open(ctx context.Context, dsn string, conns int) (driver.Driver, *sql.DB, error) {
	switch s.kind {
	case Postgres:
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, nil, err
		}
		q := u.Query()
		q.Set("pool_max_conns", fmt.Sprint(conns))
		u.RawQuery = q.Encode()
		d, err := postgres.Open(ctx, u.String(), postgres.Options{Schema: s.schema})
		if err != nil {
			return nil, nil, err
		}
		return d, d.DB(), nil
	case MariaDB:
		d, err := mysql.Open(ctx, dsn, mysql.Options{MaxConns: conns})
		if err != nil {
			return nil, nil, err
		}
		return d, d.DB(), nil
	}
	d, err := sqlite.Open(ctx, dsn, sqlite.Options{})
	if err != nil {
		return nil, nil, err
	}
	return d, d.DB(), nil
}

// table is a table of the space, qualified where the database needs it.
func (s *space) table(name string) string {
	if s.kind == Postgres {
		return s.schema + "." + name
	}
	return name
}

// rebind turns ? placeholders into the database's.
func (s *space) rebind(q string) string {
	if s.kind != Postgres {
		return q
	}
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
}

// timeArg is t as the database's timestamp columns compare it.
func (s *space) timeArg(t time.Time) any {
	switch s.kind {
	case SQLite:
		return t.UnixMicro()
	case MariaDB:
		return t.UTC()
	}
	return t
}

// upstream is the address of the database server, for the proxy; "" with
// the reason when the connection is not TCP.
func upstream(dsn string) (addr, why string) {
	switch Kind(dsn) {
	case Postgres:
		u, err := url.Parse(dsn)
		if err != nil || u.Host == "" || strings.HasPrefix(u.Hostname(), "/") {
			return "", "the PostgreSQL DSN names no TCP host"
		}
		if u.Port() == "" {
			return net.JoinHostPort(u.Hostname(), "5432"), ""
		}
		return u.Host, ""
	case MariaDB:
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil || cfg.Net != "tcp" {
			return "", "the MariaDB DSN does not connect over TCP"
		}
		return cfg.Addr, ""
	}
	return "", "SQLite is a file in this process, with no connection to cut"
}

// via rewrites the space's DSN to connect through addr.
func (s *space) via(addr string) (string, error) {
	switch s.kind {
	case Postgres:
		u, err := url.Parse(s.dsn)
		if err != nil {
			return "", err
		}
		u.Host = addr
		return u.String(), nil
	case MariaDB:
		cfg, err := gomysql.ParseDSN(s.dsn)
		if err != nil {
			return "", err
		}
		cfg.Addr = addr
		return cfg.FormatDSN(), nil
	}
	return "", errors.New("no connection to route")
}
