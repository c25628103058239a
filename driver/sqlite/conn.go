package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"time"
)

// The SQLite under the driver is chosen at build time: the pure-Go
// modernc.org/sqlite by default (conn_modernc.go), or the C SQLite of
// github.com/mattn/go-sqlite3 with the keel_cgo_sqlite build tag
// (conn_cgo.go). Each file gives only what differs: the connector of a
// connection with these settings, spelled in that SQLite's DSN; the
// result code of an error; and the name of the build. Everything else is
// the same code.

// connSettings are a connection's pragmas and modes.
type connSettings struct {
	busy        time.Duration // busy_timeout; 0: the library's default
	sync        Synchronous   // synchronous; "": the library's default
	foreignKeys bool          // foreign_keys=1
	journal     string        // journal_mode ("WAL", "DELETE"); "": as the file has it
	tempMemory  bool          // temp_store=MEMORY
	queryOnly   bool          // query_only=1
	readOnly    bool          // mode=ro: open the file read-only
	immediate   bool          // transactions begin IMMEDIATE (take the write lock)
}

// fileURI is the URI of the database file at path, without a query.
func fileURI(path string) string { return "file:" + (&url.URL{Path: path}).EscapedPath() }

// openDB opens a pool of connections with settings s to the file at path.
func openDB(path string, s connSettings) (*sql.DB, error) {
	c, err := newConnector(path, s)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// OpenDB opens the database file at path as a plain *sql.DB through the
// SQLite this binary was built with (see Build), with a busy timeout of
// 5s, read-only if readOnly. It is for tools that read a keel file
// outside a Driver (keel doctor): it applies no migrations and has no
// writer or group commit.
func OpenDB(path string, readOnly bool) (*sql.DB, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	return openDB(path, connSettings{busy: 5 * time.Second, readOnly: readOnly, queryOnly: readOnly})
}

// Version names the SQLite this binary was built with: the SQLite
// release and the Go package that brings it, such as "SQLite 3.50.4
// (modernc.org/sqlite, pure Go)".
func Version(ctx context.Context) string {
	v := "unknown"
	if db, err := openDB(":memory:", connSettings{}); err == nil {
		if err := db.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&v); err != nil {
			v = "unknown"
		}
		db.Close()
	}
	return "SQLite " + v + " (" + Build + ")"
}
