package keel_test

import (
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel"
)

func TestHistory(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 30, 0, time.UTC)
	now := t0
	c, _ := setup(t, func(cfg *keel.Config) { cfg.Now = func() time.Time { return now } })
	ctx := t.Context()
	for range 2 {
		if _, err := c.Enqueue(ctx, "t.known", map[string]int{"a": 1}); err != nil {
			t.Fatal(err)
		}
	}
	now = t0.Add(20 * time.Minute)
	if _, err := c.Enqueue(ctx, "t.other", nil, keel.Queue("other"), keel.IdempotencyKey("k")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, "t.other", nil, keel.Queue("other"), keel.IdempotencyKey("k")); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(31 * time.Minute)

	h, err := c.History(ctx, t0.Add(-10*time.Minute), 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Steps 09:45, 10:00, 10:15, 10:30.
	if len(h) != 4 || !h[0].At.Equal(time.Date(2026, 3, 1, 9, 45, 0, 0, time.UTC)) {
		t.Fatalf("history: %+v", h)
	}
	got := []int64{h[0].Enqueued, h[1].Enqueued, h[2].Enqueued, h[3].Enqueued}
	if got[0] != 0 || got[1] != 2 || got[2] != 1 || got[3] != 0 || h[2].Hits != 1 {
		t.Errorf("enqueued by step %v, hits %d; want [0 2 1 0], 1 hit", got, h[2].Hits)
	}

	m, err := c.History(ctx, t0, time.Minute)
	if err != nil || len(m) != 32 || m[0].Enqueued != 2 || m[20].Enqueued != 1 {
		t.Errorf("by minute: %d points, %v", len(m), err)
	}
	for _, bad := range []struct {
		since time.Time
		step  time.Duration
	}{
		{t0, 30 * time.Second}, {t0, 90 * time.Second}, {now.Add(time.Minute), time.Minute}, {time.Time{}, time.Minute},
		{now.Add(-30 * 24 * time.Hour), time.Minute},
	} {
		if _, err := c.History(ctx, bad.since, bad.step); !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("History(%v, %v): %v, want ErrInvalid", bad.since, bad.step, err)
		}
	}
}
