package source

import (
	"context"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/brokertest"
)

// TestHold: a source stops pulling while its type's backlog is over
// MaxBacklog and while its type is paused, and goes on once workers drain
// the backlog or the type resumes; the messages wait in the broker
// meanwhile.
func TestHold(t *testing.T) {
	drv := openDriver(t, "sqlite")
	c := newClient(t, drv)
	queue := brokertest.RabbitQueue(t)
	if err := brokertest.PublishRabbit(t.Context(), queue, orderBodies(1000)); err != nil {
		t.Fatal(err)
	}
	s, err := New(c, Config{Name: "orders", Kind: KindRabbitMQ, URL: rabbitURL, Queue: queue, Type: "order.import",
		Key: "/order_id", Logger: testLogger(t), Batch: 10, MaxBacklog: 100, Check: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop(context.Background())

	waitFor(t, 30*time.Second, "the source to hold on its backlog", func() bool { return s.Stats().State == StateBacklog })
	time.Sleep(300 * time.Millisecond) // six checks: nothing more comes in
	if n := typeCount(t, c); n < 100 || n > 110 {
		t.Fatalf("%d tasks while held, want 100..110 (MaxBacklog 100 and at most one batch of 10 over)", n)
	}
	if infos, err := c.Sources(t.Context()); err != nil || len(infos) != 1 || infos[0].State != StateBacklog {
		t.Fatalf("reported %+v (err %v), want state backlog", infos, err)
	}

	// Pausing the type holds the source even with the backlog gone.
	paused := true
	if _, err := c.UpdateType(t.Context(), "order.import", keel.TypeUpdate{Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	worker := drainer(t, drv)
	waitFor(t, 30*time.Second, "the source to hold on the paused type", func() bool { return s.Stats().State == StatePaused })
	before := s.Stats().Accepted
	time.Sleep(300 * time.Millisecond)
	if after := s.Stats().Accepted; after != before {
		t.Fatalf("accepted %d more messages while the type was paused", after-before)
	}
	paused = false
	if _, err := c.UpdateType(t.Context(), "order.import", keel.TypeUpdate{Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "every message to become a task", func() bool { return s.Stats().Accepted == 1000 })
	worker.Stop(context.Background())
}

// drainer starts a client that works order.import tasks at once.
func drainer(t *testing.T, drv driver.Driver) *keel.Client {
	t.Helper()
	h := keel.NewHandlers()
	keel.Handle(h, "order.import", func(context.Context, *keel.Task[order]) error { return nil })
	w, err := keel.NewClient(keel.Config{Driver: drv, Handlers: h, Logger: testLogger(t), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	return w
}
