package sqlite

import (
	"context"
	"database/sql/driver"
	"time"
)

// gatedConnector opens the writing connections: every transaction begun
// on one (the writer's batches, the migrations, a caller's transaction on
// DB()) takes its turn in the process (turns.go), then the gate (gate.go),
// and leaves both at its end, so every write of this process takes turns
// with the other processes'.
type gatedConnector struct {
	driver.Connector
	gate     *gate // nil: none
	patience time.Duration
	turns    *turns
	role     role
}

// newGatedConnector returns the connector of the file at path with
// settings s, for role r in t, gated by g (none if g is nil).
func newGatedConnector(path string, s connSettings, g *gate, patience time.Duration, t *turns, r role) (driver.Connector, error) {
	base, err := newConnector(path, s)
	if err != nil {
		return nil, err
	}
	return &gatedConnector{Connector: base, gate: g, patience: patience, turns: t, role: r}, nil
}

func (c *gatedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: conn, c: c}, nil
}

// gatedConn forwards every optional interface of the SQLite's connections
// (as modernc.org/sqlite's NewConnector asks of a wrapper) and gates
// BeginTx. mattn's connections (keel_cgo_sqlite) have neither
// ResetSession nor IsValid: for them gatedConn answers as database/sql
// does for a connection without them. database/sql uses a connection
// from one goroutine at a time, so in is safe without a lock.
type gatedConn struct {
	driver.Conn
	c    *gatedConnector
	turn bool // the process's turn is held for this connection's transaction
	in   bool // the gate is held for it
}

// Unwrap returns the SQLite's connection.
func (g *gatedConn) Unwrap() driver.Conn { return g.Conn }

func (g *gatedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := g.c.turns.take(ctx, g.c.role); err != nil {
		return nil, err
	}
	g.turn = true
	g.in = g.c.gate.enter(g.c.patience)
	tx, err := g.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		g.leave()
		return nil, err
	}
	return &gatedTx{Tx: tx, g: g}, nil
}

func (g *gatedConn) leave() {
	if g.in {
		g.in = false
		g.c.gate.leave()
	}
	if g.turn {
		g.turn = false
		g.c.turns.give()
	}
}

func (g *gatedConn) Close() error {
	g.leave()
	return g.Conn.Close()
}

func (g *gatedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return g.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

// ExecContext runs a statement; outside a transaction it takes no turn
// (an autocommit write waits on SQLite's busy handler): in turns, each
// caller's INSERT waited for the other processes' writes too, and a drain
// whose handlers wrote so ran 30% slower.
func (g *gatedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return g.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (g *gatedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return g.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (g *gatedConn) Ping(ctx context.Context) error { return g.Conn.(driver.Pinger).Ping(ctx) }

func (g *gatedConn) ResetSession(ctx context.Context) error {
	if r, ok := g.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (g *gatedConn) IsValid() bool {
	if v, ok := g.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// gatedTx leaves the gate when its transaction ends.
type gatedTx struct {
	driver.Tx
	g *gatedConn
}

func (t *gatedTx) Commit() error {
	defer t.g.leave()
	return t.Tx.Commit()
}

func (t *gatedTx) Rollback() error {
	defer t.g.leave()
	return t.Tx.Rollback()
}

var (
	_ driver.ConnBeginTx        = (*gatedConn)(nil)
	_ driver.ConnPrepareContext = (*gatedConn)(nil)
	_ driver.ExecerContext      = (*gatedConn)(nil)
	_ driver.QueryerContext     = (*gatedConn)(nil)
	_ driver.Pinger             = (*gatedConn)(nil)
	_ driver.SessionResetter    = (*gatedConn)(nil)
	_ driver.Validator          = (*gatedConn)(nil)
)
