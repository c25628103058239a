//go:build !keel_cgo_sqlite

package sqlite

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	msqlite "modernc.org/sqlite"
)

// Build names the SQLite package this binary was built with.
const Build = "modernc.org/sqlite, pure Go"

// newConnector returns the connector of the file at path with settings s,
// in modernc's DSN (_pragma=name(value)).
func newConnector(path string, s connSettings) (driver.Connector, error) {
	var q []string
	if s.readOnly {
		q = append(q, "mode=ro")
	}
	if s.busy > 0 {
		q = append(q, fmt.Sprintf("_pragma=busy_timeout(%d)", s.busy.Milliseconds()))
	}
	if s.sync != "" {
		q = append(q, "_pragma=synchronous("+string(s.sync)+")")
	}
	if s.foreignKeys {
		q = append(q, "_pragma=foreign_keys(1)")
	}
	if s.journal != "" {
		q = append(q, "_pragma=journal_mode("+s.journal+")")
	}
	if s.tempMemory {
		q = append(q, "_pragma=temp_store(2)")
	}
	if s.queryOnly {
		q = append(q, "_pragma=query_only(1)")
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
	return msqlite.NewConnector(dsn)
}

// errCode returns the SQLite result code (extended) of err.
func errCode(err error) (int, bool) {
	var e *msqlite.Error
	if errors.As(err, &e) {
		return e.Code(), true
	}
	return 0, false
}
