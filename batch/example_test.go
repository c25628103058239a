package batch_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	"github.com/keelq/keel/driver/sqlite"
)

// A batch of reports with one callback when all of them have finished: the
// callback's payload carries the batch's final counts and its own data.
func ExampleEnqueue() {
	dir, err := os.MkdirTemp("", "keel-batch-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()

	h := keel.NewHandlers()
	keel.Handle(h, "report.build", func(ctx context.Context, t *keel.Task[struct{ Account string }]) error {
		if t.Args.Account == "" {
			return keel.Permanent(errors.New("no account"))
		}
		return nil
	})
	summary := make(chan batch.Event, 1)
	keel.Handle(h, "report.summary", func(ctx context.Context, t *keel.Task[batch.Event]) error {
		summary <- t.Args
		return nil
	})
	c, err := keel.NewClient(keel.Config{Driver: drv, Handlers: h, Logger: slog.New(slog.DiscardHandler),
		PollInterval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	b, members, err := batch.Enqueue(ctx, c, batch.Spec{
		Tasks: []keel.TaskSpec{
			{Type: "report.build", Payload: map[string]string{"Account": "acme"}},
			{Type: "report.build", Payload: map[string]string{"Account": "globex"}},
			{Type: "report.build", Payload: map[string]string{}}, // dead: no account
		},
		OnFinish: &keel.TaskSpec{Type: "report.summary", Payload: map[string]string{"to": "ops@example.com"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.State, b.Total, len(members))
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)
	ev := <-summary
	fmt.Println(ev.Kind, ev.Total, ev.Succeeded, ev.Dead, string(ev.Data))
	// Output:
	// running 3 3
	// on_finish 3 2 1 {"to":"ops@example.com"}
}
