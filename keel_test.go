package keel_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// payload is the argument type of the tests' tasks.
type payload struct {
	N int    `json:"n"`
	S string `json:"s,omitempty"`
}

// setup returns a fresh SQLite database and an enqueue-only client that
// knows the types "t.known" and "t.other". mod changes the config.
func setup(t *testing.T, mod ...func(*keel.Config)) (*keel.Client, *sqlite.Driver) {
	t.Helper()
	drv, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	cfg := keel.Config{Driver: drv, Types: []string{"t.known", "t.other"}, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := keel.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, drv
}

// requireEmpty fails the test unless the database holds no task at all.
func requireEmpty(t *testing.T, c *keel.Client) {
	t.Helper()
	counts, err := c.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 0 {
		t.Fatalf("tasks were written: %v", counts)
	}
	list, err := c.List(context.Background(), keel.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Fatalf("tasks were written: %d listed", len(list))
	}
}
