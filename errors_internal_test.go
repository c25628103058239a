package keel

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
)

type pgxLike struct{ safe bool }

func (e pgxLike) Error() string     { return "conn closed" }
func (e pgxLike) SafeToRetry() bool { return e.safe }

// pgErrLike carries a SQLSTATE the way pgx's PgError does.
type pgErrLike struct{ code string }

func (e pgErrLike) Error() string    { return "FATAL: (SQLSTATE " + e.code + ")" }
func (e pgErrLike) SQLState() string { return e.code }

// TestUnavailableClassifiesConnectionFailures: failures to reach the
// database become ErrUnavailable; answers from it, a closed client and the
// caller's own cancellation do not.
func TestUnavailableClassifiesConnectionFailures(t *testing.T) {
	ctx := context.Background()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("connect: %w", syscall.ECONNREFUSED)}
	for _, err := range []error{
		fmt.Errorf("insert tasks: %w", refused),
		fmt.Errorf("read: %w", syscall.ECONNRESET),
		fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF),
		fmt.Errorf("begin: %w", sql.ErrConnDone),
		fmt.Errorf("insert tasks: %w", pgxLike{safe: true}),
		// A server shutting down, crashed, starting up, or a connection
		// exception (class 08).
		fmt.Errorf("insert tasks: %w", pgErrLike{"57P01"}),
		fmt.Errorf("insert tasks: %w", pgErrLike{"57P02"}),
		fmt.Errorf("connect: %w", pgErrLike{"57P03"}),
		fmt.Errorf("insert tasks: %w", pgErrLike{"08006"}),
	} {
		if got := unavailable(ctx, err); !errors.Is(got, ErrUnavailable) || !errors.Is(got, err) {
			t.Errorf("unavailable(%v) = %v, want ErrUnavailable wrapping it", err, got)
		}
	}
	for _, err := range []error{
		errors.New("sql: database is closed"),
		errors.New(`ERROR: duplicate key value violates unique constraint (SQLSTATE 23505)`),
		pgxLike{safe: false},
		pgErrLike{"23505"},
		pgErrLike{"57014"}, // query_canceled: a statement timeout, not a lost server
		ErrNotFound,
		nil,
	} {
		if got := unavailable(ctx, err); errors.Is(got, ErrUnavailable) {
			t.Errorf("unavailable(%v) = %v, want it unchanged", err, got)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if got := unavailable(cancelled, fmt.Errorf("x: %w", refused)); errors.Is(got, ErrUnavailable) {
		t.Errorf("after the caller's context ended: %v, want it unchanged", got)
	}
}
