//go:build keel_cgo_sqlite && cgo

package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/mattn/go-sqlite3"
)

// Build names the SQLite package this binary was built with.
const Build = "github.com/mattn/go-sqlite3, cgo"

// newConnector returns the connector of the file at path with settings s,
// in mattn's DSN (_name=value). mattn has no parameter for temp_store:
// a connect hook sets it.
func newConnector(path string, s connSettings) (driver.Connector, error) {
	var q []string
	if s.readOnly {
		q = append(q, "mode=ro")
	}
	if s.busy > 0 {
		q = append(q, fmt.Sprintf("_busy_timeout=%d", s.busy.Milliseconds()))
	}
	if s.sync != "" {
		q = append(q, "_synchronous="+string(s.sync))
	}
	if s.foreignKeys {
		q = append(q, "_foreign_keys=1")
	}
	if s.journal != "" {
		q = append(q, "_journal_mode="+s.journal)
	}
	if s.queryOnly {
		q = append(q, "_query_only=1")
	}
	if s.immediate {
		q = append(q, "_txlock=immediate")
	}
	dsn := fileURI(path)
	if path == ":memory:" {
		dsn = path
	}
	if len(q) > 0 {
		dsn += "?" + strings.Join(q, "&")
	}
	d := &sqlite3.SQLiteDriver{}
	if s.tempMemory {
		d.ConnectHook = func(c *sqlite3.SQLiteConn) error {
			_, err := c.Exec(`PRAGMA temp_store=MEMORY`, nil)
			return err
		}
	}
	return &cgoConnector{dsn: dsn, d: d}, nil
}

// cgoConnector opens mattn's connections (mattn has no Connector).
type cgoConnector struct {
	dsn string
	d   *sqlite3.SQLiteDriver
}

func (c *cgoConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.d.Open(c.dsn)
}

func (c *cgoConnector) Driver() driver.Driver { return c.d }

// errCode returns the SQLite result code (extended) of err.
func errCode(err error) (int, bool) {
	var e sqlite3.Error
	if errors.As(err, &e) {
		if e.ExtendedCode != 0 {
			return int(e.ExtendedCode), true
		}
		return int(e.Code), true
	}
	return 0, false
}
