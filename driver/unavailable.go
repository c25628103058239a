package driver

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
)

// Unreachable reports whether err says the database could not be reached,
// rather than being an answer from it: a network error (refused, reset,
// timed out, unresolvable host), a connection the driver found broken, a
// conversation cut short, a statement the driver says never reached the
// server (pgx's SafeToRetry, for a pooled connection that had been
// closed), or a server that is shutting down, starting up or has cut the
// connection (SQLSTATE class 08, and 57P01 admin_shutdown, 57P02
// crash_shutdown, 57P03 cannot_connect_now, 57P05 idle_session_timeout,
// from any error with a SQLState method, as pgx's and lib/pq's have). It
// needs no database library: a driver whose library reports these some
// other way classifies them itself (see Unavailable).
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	if r, ok := errors.AsType[retrySafe](err); ok && r.SafeToRetry() {
		return true
	}
	if s, ok := errors.AsType[sqlStater](err); ok && unreachableState(s.SQLState()) {
		return true
	}
	for _, target := range []error{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.ETIMEDOUT,
		sqldriver.ErrBadConn, sql.ErrConnDone, io.ErrUnexpectedEOF,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// retrySafe is an error that knows whether its statement reached the
// server (pgx's errors do).
type retrySafe interface {
	error
	SafeToRetry() bool
}

// sqlStater is an error carrying a SQLSTATE (pgx's PgError, lib/pq's
// Error).
type sqlStater interface {
	error
	SQLState() string
}

// unreachableState reports whether a SQLSTATE says the server is gone,
// shutting down or starting: connection exceptions (class 08) and the
// operator interventions that end or refuse a session.
func unreachableState(code string) bool {
	switch code {
	case "57P01", "57P02", "57P03", "57P05":
		return true
	}
	return strings.HasPrefix(code, "08")
}

// Unavailable returns err wrapped with ErrUnavailable when it says the
// database could not be reached (Unreachable, or also is true for it),
// else err unchanged. The original error stays visible to errors.Is and
// errors.As. An error after ctx ended is the caller's own (its deadline or
// cancel), and is returned as it is. Drivers call it on the errors their
// library returns.
func Unavailable(ctx context.Context, err error, also func(error) bool) error {
	if err == nil || ctx.Err() != nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if Unreachable(err) || (also != nil && also(err)) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
