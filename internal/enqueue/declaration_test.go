package enqueue

import (
	"context"
	"errors"
	"testing"

	"github.com/keelq/keel/driver"
)

// TestDeclaration: a registration that declares a default wins; else the
// stored declaration applies, nil when there is none.
func TestDeclaration(t *testing.T) {
	var read []string
	stored := func(_ context.Context, types []string) (map[string]*driver.TypeDefaults, error) {
		read = append(read, types...)
		return map[string]*driver.TypeDefaults{"plain": {Name: "plain", MaxAttempts: 9}}, nil
	}
	ctx := context.Background()
	d, err := preparer().Declaration(ctx, stored, "email")
	if err != nil || d == nil || d.Name != "email" || d.Queue != "mail" || d.MaxAttempts != 7 || len(read) != 0 {
		t.Fatalf("registered: %+v %v (read %v)", d, err, read)
	}
	if d, err := preparer().Declaration(ctx, stored, "plain"); err != nil || d == nil || d.MaxAttempts != 9 {
		t.Fatalf("stored: %+v %v", d, err)
	}
	if d, err := preparer().Declaration(ctx, stored, "other"); err != nil || d != nil {
		t.Fatalf("none: %+v %v", d, err)
	}
	down := errors.New("down")
	_, err = preparer().Declaration(ctx, func(context.Context, []string) (map[string]*driver.TypeDefaults, error) { return nil, down }, "plain")
	if !errors.Is(err, down) {
		t.Fatalf("stored fails: %v", err)
	}
}
