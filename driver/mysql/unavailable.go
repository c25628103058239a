package mysql

import (
	"context"
	sqldriver "database/sql/driver"
	"errors"
	"reflect"

	"github.com/go-sql-driver/mysql"

	"github.com/keelq/keel/driver"
)

// unreachable reports whether err is go-sql-driver's or the server's way
// of saying the server is gone, going or not there yet: a connection
// broken mid-conversation ("invalid connection"), too many connections
// (1040), a shutdown in progress (1053), an aborted or killed connection
// (1152, MariaDB's 1927), the client errors for a server that cannot be
// reached or went away (2002, 2003, 2006, 2013) and MySQL's disconnect
// for inactivity (4031). driver.Unreachable covers the rest (network
// errors, driver.ErrBadConn).
func unreachable(err error) bool {
	if errors.Is(err, mysql.ErrInvalidConn) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1040, 1053, 1152, 1927, 2002, 2003, 2006, 2013, 4031:
			return true
		}
	}
	return false
}

// unavailable wraps err with driver.ErrUnavailable when it says the server
// could not be reached, unless ctx ended (see driver.Unavailable); the
// original error stays visible.
func unavailable(ctx context.Context, err error) error {
	return driver.Unavailable(ctx, err, unreachable)
}

// classifying is a connector whose connections translate go-sql-driver's
// errors at the driver boundary (see unreachable): every statement, commit
// and row read of the driver, and of callers' transactions on DB, returns
// driver.ErrUnavailable for a server that is gone. Every other error, and
// database/sql's own signals (driver.ErrSkip, io.EOF at the end of rows),
// pass unchanged; driver.ErrBadConn stays visible to database/sql's
// errors.Is, so it still retries on a fresh connection.
type classifying struct{ sqldriver.Connector }

func (c classifying) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	mc, ok := conn.(mysqlConn)
	if !ok { // not go-sql-driver's connection as this driver knows it
		return conn, nil
	}
	return &classifyingConn{conn: mc}, nil
}

// mysqlConn is what go-sql-driver's connections implement.
type mysqlConn interface {
	sqldriver.Conn
	sqldriver.ConnBeginTx
	sqldriver.ConnPrepareContext
	sqldriver.ExecerContext
	sqldriver.QueryerContext
	sqldriver.Pinger
	sqldriver.SessionResetter
	sqldriver.Validator
	sqldriver.NamedValueChecker
}

var _ mysqlConn = (*classifyingConn)(nil)

type classifyingConn struct{ conn mysqlConn }

func (c *classifyingConn) Prepare(query string) (sqldriver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *classifyingConn) PrepareContext(ctx context.Context, query string) (sqldriver.Stmt, error) {
	s, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	ms, ok := s.(mysqlStmt)
	if !ok {
		return s, nil
	}
	return &classifyingStmt{stmt: ms}, nil
}

func (c *classifyingConn) Close() error { return c.conn.Close() }

func (c *classifyingConn) Begin() (sqldriver.Tx, error) {
	return c.BeginTx(context.Background(), sqldriver.TxOptions{})
}

func (c *classifyingConn) BeginTx(ctx context.Context, opts sqldriver.TxOptions) (sqldriver.Tx, error) {
	tx, err := c.conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return classifyingTx{ctx: ctx, tx: tx}, nil
}

func (c *classifyingConn) ExecContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	r, err := c.conn.ExecContext(ctx, query, args)
	return r, unavailable(ctx, err)
}

func (c *classifyingConn) QueryContext(ctx context.Context, query string, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	r, err := c.conn.QueryContext(ctx, query, args)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return classifyRows(ctx, r), nil
}

func (c *classifyingConn) Ping(ctx context.Context) error { return unavailable(ctx, c.conn.Ping(ctx)) }

func (c *classifyingConn) ResetSession(ctx context.Context) error { return c.conn.ResetSession(ctx) }

func (c *classifyingConn) IsValid() bool { return c.conn.IsValid() }

func (c *classifyingConn) CheckNamedValue(nv *sqldriver.NamedValue) error {
	return c.conn.CheckNamedValue(nv)
}

// classifyingTx is a transaction begun under ctx.
type classifyingTx struct {
	ctx context.Context
	tx  sqldriver.Tx
}

func (t classifyingTx) Commit() error   { return unavailable(t.ctx, t.tx.Commit()) }
func (t classifyingTx) Rollback() error { return unavailable(t.ctx, t.tx.Rollback()) }

// mysqlStmt is what go-sql-driver's statements implement.
type mysqlStmt interface {
	sqldriver.Stmt
	sqldriver.StmtExecContext
	sqldriver.StmtQueryContext
	sqldriver.NamedValueChecker
	sqldriver.ColumnConverter //nolint:staticcheck // go-sql-driver's statements have one
}

type classifyingStmt struct{ stmt mysqlStmt }

func (s *classifyingStmt) Close() error  { return s.stmt.Close() }
func (s *classifyingStmt) NumInput() int { return s.stmt.NumInput() }

func (s *classifyingStmt) Exec(args []sqldriver.Value) (sqldriver.Result, error) { //nolint:staticcheck // required by driver.Stmt
	r, err := s.stmt.Exec(args) //nolint:staticcheck // required by driver.Stmt
	return r, unavailable(context.Background(), err)
}

func (s *classifyingStmt) Query(args []sqldriver.Value) (sqldriver.Rows, error) { //nolint:staticcheck // required by driver.Stmt
	r, err := s.stmt.Query(args) //nolint:staticcheck // required by driver.Stmt
	if err != nil {
		return nil, unavailable(context.Background(), err)
	}
	return classifyRows(context.Background(), r), nil
}

func (s *classifyingStmt) ExecContext(ctx context.Context, args []sqldriver.NamedValue) (sqldriver.Result, error) {
	r, err := s.stmt.ExecContext(ctx, args)
	return r, unavailable(ctx, err)
}

func (s *classifyingStmt) QueryContext(ctx context.Context, args []sqldriver.NamedValue) (sqldriver.Rows, error) {
	r, err := s.stmt.QueryContext(ctx, args)
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	return classifyRows(ctx, r), nil
}

func (s *classifyingStmt) CheckNamedValue(nv *sqldriver.NamedValue) error {
	return s.stmt.CheckNamedValue(nv)
}

func (s *classifyingStmt) ColumnConverter(idx int) sqldriver.ValueConverter {
	return s.stmt.ColumnConverter(idx)
}

// mysqlRows is what go-sql-driver's rows implement.
type mysqlRows interface {
	sqldriver.Rows
	sqldriver.RowsNextResultSet
	sqldriver.RowsColumnTypeDatabaseTypeName
	sqldriver.RowsColumnTypeNullable
	sqldriver.RowsColumnTypePrecisionScale
	sqldriver.RowsColumnTypeScanType
}

// classifyingRows are the rows of a query run under ctx.
type classifyingRows struct {
	ctx  context.Context
	rows mysqlRows
}

func classifyRows(ctx context.Context, r sqldriver.Rows) sqldriver.Rows {
	if mr, ok := r.(mysqlRows); ok {
		return &classifyingRows{ctx: ctx, rows: mr}
	}
	return r
}

func (r *classifyingRows) Columns() []string { return r.rows.Columns() }
func (r *classifyingRows) Close() error      { return unavailable(r.ctx, r.rows.Close()) }

// Next passes io.EOF, the end of the rows, unchanged: unavailable leaves
// it alone.
func (r *classifyingRows) Next(dest []sqldriver.Value) error {
	return unavailable(r.ctx, r.rows.Next(dest))
}

func (r *classifyingRows) HasNextResultSet() bool { return r.rows.HasNextResultSet() }
func (r *classifyingRows) NextResultSet() error   { return unavailable(r.ctx, r.rows.NextResultSet()) }

func (r *classifyingRows) ColumnTypeDatabaseTypeName(i int) string {
	return r.rows.ColumnTypeDatabaseTypeName(i)
}

func (r *classifyingRows) ColumnTypeNullable(i int) (nullable, ok bool) {
	return r.rows.ColumnTypeNullable(i)
}

func (r *classifyingRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	return r.rows.ColumnTypePrecisionScale(i)
}

func (r *classifyingRows) ColumnTypeScanType(i int) reflect.Type { return r.rows.ColumnTypeScanType(i) }
