package keel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// syncBuffer is a bytes.Buffer safe for the engine's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the JSON log records whose msg starts with prefix.
func (b *syncBuffer) records(t *testing.T, prefix string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if strings.HasPrefix(r["msg"].(string), prefix) {
			out = append(out, r)
		}
	}
	return out
}

// recorder is an Observer keeping every event.
type recorder struct {
	mu     sync.Mutex
	events []keel.Event
}

func (r *recorder) Observe(ev keel.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

// TestStateChangeEvents: one log record per state change, at its level
// with its attributes (success DEBUG, retry WARN, dead ERROR, cancel
// INFO), and the matching Observer events.
func TestStateChangeEvents(t *testing.T) {
	ctx := context.Background()
	logs := &syncBuffer{}
	h := keel.NewHandlers()
	keel.Handle(h, "t.flaky", func(ctx context.Context, task *keel.Task[struct{}]) error {
		if task.Attempt == 1 {
			return errors.New("boom")
		}
		return nil
	}, keel.Backoff(time.Millisecond, time.Millisecond))
	keel.Handle(h, "t.dead", func(ctx context.Context, task *keel.Task[struct{}]) error {
		return keel.Permanent(errors.New("no such recipient"))
	})
	c, _ := setup(t, func(cfg *keel.Config) {
		cfg.Handlers, cfg.Types = h, nil
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		cfg.PollInterval, cfg.BackoffJitter = 20*time.Millisecond, -1
	})
	rec := &recorder{}
	c.Observe(rec)

	flaky, err := c.Enqueue(ctx, "t.flaky", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The claim returns meta: an attempt's records carry the trace id of
	// the task's traceparent.
	const deadTrace = "0af7651916cd43dd8448eb211c80319c"
	dead, err := c.Enqueue(ctx, "t.dead", nil, keel.Queue("default"),
		keel.Meta(map[string]string{"traceparent": "00-" + deadTrace + "-b7ad6b7169203331-01"}))
	if err != nil {
		t.Fatal(err)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	later, err := c.Enqueue(ctx, "t.flaky", nil, keel.Delay(time.Hour),
		keel.Meta(map[string]string{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		a, _ := c.Get(ctx, flaky.ID)
		b, _ := c.Get(ctx, dead.ID)
		if a.State == keel.StateSucceeded && b.State == keel.StateDead {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("states %s, %s after 20s", a.State, b.State)
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c.Stop(stopCtx)

	node := c.Node()
	check := func(prefix, level string, want map[string]any) {
		t.Helper()
		recs := logs.records(t, prefix)
		if len(recs) != 1 {
			t.Fatalf("%d records %q, want 1", len(recs), prefix)
		}
		r := recs[0]
		if r["level"] != level {
			t.Errorf("%q at %v, want %s", prefix, r["level"], level)
		}
		for k, v := range want {
			if r[k] != v {
				t.Errorf("%q: %s = %#v, want %#v", prefix, k, r[k], v)
			}
		}
		if _, ok := r["duration_ms"].(float64); !ok && level != "INFO" {
			t.Errorf("%q: no duration_ms: %v", prefix, r)
		}
	}
	check("keel: task attempt failed, will retry", "WARN", map[string]any{
		"task_id": float64(flaky.ID), "type": "t.flaky", "queue": "default", "attempt": float64(1), "node": node,
		"outcome": "error", "error": "boom", "state": "pending",
	})
	check("keel: task succeeded", "DEBUG", map[string]any{
		"task_id": float64(flaky.ID), "type": "t.flaky", "queue": "default", "attempt": float64(2), "node": node,
		"outcome": "succeeded", "state": "succeeded",
	})
	check("keel: task dead-lettered", "ERROR", map[string]any{
		"task_id": float64(dead.ID), "type": "t.dead", "queue": "default", "attempt": float64(1), "node": node,
		"outcome": "permanent", "error": "permanent: no such recipient", "state": "dead", "trace_id": deadTrace,
	})
	check("keel: task cancelled", "INFO", map[string]any{
		"task_id": float64(later.ID), "type": "t.flaky", "queue": "default", "attempt": float64(0), "node": node,
		"state": "cancelled", "trace_id": traceID,
	})
	for _, r := range logs.records(t, "keel: task") {
		if _, ok := r["trace_id"]; ok && r["msg"] != "keel: task cancelled" && r["msg"] != "keel: task dead-lettered" {
			t.Errorf("trace_id on a task without a traceparent: %v", r)
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	var kinds []string
	for _, ev := range rec.events {
		kinds = append(kinds, string(ev.Kind)+":"+string(ev.Outcome)+":"+string(ev.State))
	}
	want := map[string]int{
		"enqueued::pending": 3, "cancelled::cancelled": 1, "started::": 3,
		"attempt:error:pending": 1, "attempt:succeeded:succeeded": 1, "attempt:permanent:dead": 1,
	}
	got := map[string]int{}
	for _, k := range kinds {
		got[k]++
	}
	if len(got) != len(want) {
		t.Errorf("events %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("events %v, want %v", got, want)
			break
		}
	}
}
