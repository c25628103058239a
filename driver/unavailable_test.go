package driver_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/keelq/keel/driver"
)

// sqlStateErr carries a SQLSTATE the way pgx's PgError does.
type sqlStateErr string

func (e sqlStateErr) Error() string    { return "server error (SQLSTATE " + string(e) + ")" }
func (e sqlStateErr) SQLState() string { return string(e) }

// TestUnavailable: a driver's errors that say the server is gone, going
// or starting are wrapped with ErrUnavailable (the original kept); an
// answer from the server, an error the driver's own test does not name,
// and any error after the caller's context ended are left alone.
func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	invalidConn := errors.New("invalid connection")
	isInvalidConn := func(err error) bool { return errors.Is(err, invalidConn) }
	for _, err := range []error{
		fmt.Errorf("commit: %w", syscall.ECONNRESET),
		sqlStateErr("57P01"), sqlStateErr("57P03"), sqlStateErr("08006"),
		fmt.Errorf("claim tasks: %w", invalidConn),
	} {
		got := driver.Unavailable(ctx, err, isInvalidConn)
		if !errors.Is(got, driver.ErrUnavailable) || !errors.Is(got, err) {
			t.Errorf("Unavailable(%v) = %v, want ErrUnavailable wrapping it", err, got)
		}
	}
	for _, err := range []error{nil, sqlStateErr("23505"), sqlStateErr("57014"), invalidConn} {
		also := isInvalidConn
		if err == invalidConn {
			also = nil // not this driver's
		}
		if got := driver.Unavailable(ctx, err, also); got != err {
			t.Errorf("Unavailable(%v) = %v, want it unchanged", err, got)
		}
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := fmt.Errorf("x: %w", syscall.ECONNRESET); driver.Unavailable(ended, err, nil) != err {
		t.Error("an error after the caller's context ended was wrapped")
	}
}
