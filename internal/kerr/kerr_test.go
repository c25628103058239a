package kerr

import (
	"errors"
	"strings"
	"testing"
)

func TestInvalidWrapsAndShortens(t *testing.T) {
	err := Invalid("queue %q and %d", strings.Repeat("x", 1000), 7)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("%v does not wrap ErrInvalid", err)
	}
	if len(err.Error()) > 300 {
		t.Fatalf("error echoes the whole input: %d bytes", len(err.Error()))
	}
	if got := Invalid("no tasks to enqueue").Error(); got != "keel: invalid input: no tasks to enqueue" {
		t.Fatalf("message %q", got)
	}
}
