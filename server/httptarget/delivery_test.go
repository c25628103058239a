package httptarget_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/keeltest"
	"github.com/keelq/keel/server/httptarget"
)

// TestDeliveryHeader: a request cut off by a graceful stop gives its
// attempt back, so the next request repeats Keel-Attempt; Keel-Delivery
// tells the two apart.
func TestDeliveryHeader(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	var tg *target
	tg = newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			arrived <- struct{}{}
			tg.hang(r) // until the stop cancels it
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	drv, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	worker := func() *keel.Client {
		h := keel.NewHandlers()
		mustRegister(t, h, "hook", httptarget.Target{URL: tg.URL + "/hook"})
		c, err := keel.NewClient(keel.Config{Driver: drv, Handlers: h, PollInterval: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Stop(context.Background()) })
		return c
	}

	first := worker()
	id := enqueue(t, first, "hook", nil).ID
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the target got no request")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := first.Stop(ctx); err != nil { // cancels the request: the task is released
		t.Fatal(err)
	}
	if ti, err := first.Get(context.Background(), id); err != nil || ti.State != keel.StatePending || ti.Attempt != 0 {
		t.Fatalf("after the stop: task %+v (%v), want pending with its attempt given back", ti, err)
	}

	second := worker()
	if done := keeltest.WaitFinished(t, second, id, 0); done.State != keel.StateSucceeded {
		t.Fatalf("task %s, want succeeded", done.State)
	}
	reqs := tg.requests("/hook")
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, want := range []string{"1", "2"} {
		h := reqs[i].Header
		if h.Get("Keel-Attempt") != "1" || h.Get("Keel-Delivery") != want || h.Get("Keel-Fence") != want {
			t.Errorf("request %d: Keel-Attempt %q Keel-Delivery %q, want 1 and %s", i+1, h.Get("Keel-Attempt"), h.Get("Keel-Delivery"), want)
		}
	}
	if a, b := reqs[0].Header.Get("Idempotency-Key"), reqs[1].Header.Get("Idempotency-Key"); a != b || a == "" {
		t.Errorf("Idempotency-Key %q then %q, want the same", a, b)
	}
}
