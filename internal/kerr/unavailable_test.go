package kerr

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"

	"github.com/keelq/keel/driver"
)

func TestUnavailable(t *testing.T) {
	ctx := context.Background()
	refused := syscall.ECONNREFUSED
	if err := Unavailable(ctx, refused); !errors.Is(err, driver.ErrUnavailable) || !errors.Is(err, refused) {
		t.Fatalf("refused: %v", err)
	}
	already := Unavailable(ctx, refused)
	if err := Unavailable(ctx, already); err != already {
		t.Fatalf("wrapped twice: %v", err)
	}
	answer := errors.New("duplicate key")
	if err := Unavailable(ctx, answer); err != answer {
		t.Fatalf("an answer from the database: %v", err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := Unavailable(ended, io.ErrUnexpectedEOF); err != io.ErrUnexpectedEOF {
		t.Fatalf("after ctx ended: %v", err)
	}
	if err := Unavailable(ctx, nil); err != nil {
		t.Fatalf("nil: %v", err)
	}
}
