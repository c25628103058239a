package keel_test

import (
	"context"
	"encoding/json"
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
	// The history starts at 10:00: nothing is recorded of 09:45 to 10:00.
	if !h[0].Unrecorded || h[1].Unrecorded || h[3].Unrecorded {
		t.Errorf("unrecorded steps: %v %v %v %v, want only the first", h[0].Unrecorded, h[1].Unrecorded, h[2].Unrecorded, h[3].Unrecorded)
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

// TestHistoryBacklogPeak: a step reports the most pending tasks sampled
// in it, also when most left again within the minute, and the steps before
// the history's first minute say that nothing is recorded of them.
func TestHistoryBacklogPeak(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 10, 0, time.UTC)
	now := t0
	c, _ := setup(t, func(cfg *keel.Config) { cfg.Now = func() time.Time { return now } })
	ctx := t.Context()
	var ids []int64
	for i := range 22 {
		ti, err := c.Enqueue(ctx, "t.known", map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ti.ID)
	}
	if err := keel.SampleBacklog(ctx, c); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(30 * time.Second)
	for _, id := range ids[:18] {
		if _, err := c.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := keel.SampleBacklog(ctx, c); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(70 * time.Second)
	if err := keel.SampleBacklog(ctx, c); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(3 * time.Minute)
	h, err := c.History(ctx, t0.Add(-5*time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Steps 09:55 … 10:03; the history starts at 10:00.
	if len(h) != 9 || !h[5].At.Equal(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("history: %+v", h)
	}
	for i, p := range h {
		if want := i < 5; p.Unrecorded != want {
			t.Errorf("step %v: unrecorded %v, want %v", p.At.Format("15:04"), p.Unrecorded, want)
		}
	}
	if !h[5].Sampled || h[5].PendingPeak != 22 || !h[6].Sampled || h[6].PendingPeak != 4 || h[7].Sampled || h[4].Sampled {
		t.Errorf("peaks 09:59 %d (%v), 10:00 %d (%v), 10:01 %d (%v), 10:02 %d (%v); want none, 22, 4, none",
			h[4].PendingPeak, h[4].Sampled, h[5].PendingPeak, h[5].Sampled, h[6].PendingPeak, h[6].Sampled, h[7].PendingPeak, h[7].Sampled)
	}
	// Fifteen-minute steps (09:45, 10:00) take the largest of their minutes.
	q, err := c.History(ctx, t0.Add(-5*time.Minute), 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 2 || !q[0].Unrecorded || q[0].Sampled || q[1].PendingPeak != 22 || q[1].Unrecorded {
		t.Errorf("15-minute steps: %+v", q)
	}
}

// TestBacklogSampledByLeader: a started client that leads samples the
// pending tasks on its own (every 5 seconds).
func TestBacklogSampledByLeader(t *testing.T) {
	// A worker of queue "idle" only: the tasks of queue default wait.
	h := keel.NewHandlers()
	keel.Handle(h, "t.other", func(context.Context, *keel.Task[json.RawMessage]) error { return nil })
	c, drv := setup(t, func(cfg *keel.Config) {
		cfg.Handlers, cfg.Queues = h, map[string]keel.QueueConfig{"idle": {}}
	})
	ctx := t.Context()
	for i := range 3 {
		if _, err := c.Enqueue(ctx, "t.known", map[string]int{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(stopCtx) //nolint:errcheck // always nil
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		peaks, err := drv.BacklogPeaks(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(peaks) > 0 {
			if peaks[len(peaks)-1].Pending != 3 {
				t.Fatalf("sampled %+v, want 3 pending", peaks)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no backlog sample after 30s")
		}
	}
}
