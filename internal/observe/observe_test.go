package observe_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/observe"
)

// TestKinds: the kinds a Hub makes are keel's.
func TestKinds(t *testing.T) {
	for got, want := range map[string]keel.EventKind{
		observe.KindStarted: keel.EventStarted, observe.KindAttempt: keel.EventAttempt,
		observe.KindRescued: keel.EventRescued, observe.KindCancelled: keel.EventCancelled,
	} {
		if got != string(want) {
			t.Errorf("kind %q, keel's is %q", got, want)
		}
	}
}

// TestHub: every observer added sees the events from then on, in order;
// the engine's events arrive as keel's, an attempt not applied does not.
func TestHub(t *testing.T) {
	var h observe.Hub[keel.EventKind]
	if h.Active() {
		t.Fatal("active with no observer")
	}
	h.Started(engine.AttemptStart{Queue: "q", Type: "t", Attempt: 1}) // nobody to tell
	var a, b []keel.Event
	h.Add(func(e observe.Event[keel.EventKind]) { a = append(a, keel.Event(e)) })
	h.Started(engine.AttemptStart{Queue: "q", Type: "t", Attempt: 1, PickupLatency: time.Second})
	h.Add(func(e observe.Event[keel.EventKind]) { b = append(b, keel.Event(e)) })
	if !h.Active() {
		t.Fatal("not active with observers")
	}
	h.Finished(engine.AttemptEnd{TaskID: 7, Queue: "q", Type: "t", Attempt: 1, Kind: "error", State: driver.StatePending,
		Error: "boom", Duration: time.Millisecond, CommitLatency: 2 * time.Millisecond, Applied: true})
	h.Finished(engine.AttemptEnd{TaskID: 8, Kind: "succeeded", Applied: false})
	h.Rescued(engine.Rescue{TaskID: 9, Queue: "q", Type: "t", Attempt: 3, State: driver.StateDead})
	h.Emit(observe.Event[keel.EventKind]{Kind: keel.EventEnqueued, TaskID: 10, Schedule: "nightly"})

	want := []keel.Event{
		{Kind: keel.EventStarted, Queue: "q", Type: "t", Attempt: 1, PickupLatency: time.Second},
		{Kind: keel.EventAttempt, TaskID: 7, Queue: "q", Type: "t", Attempt: 1, Duration: time.Millisecond,
			CommitLatency: 2 * time.Millisecond, Outcome: keel.OutcomeError, State: keel.StatePending, Error: "boom"},
		{Kind: keel.EventRescued, TaskID: 9, Queue: "q", Type: "t", Attempt: 3, Outcome: keel.OutcomeLeaseExpired,
			State: keel.StateDead},
		{Kind: keel.EventEnqueued, TaskID: 10, Schedule: "nightly"},
	}
	if len(a) != len(want) || len(b) != len(want)-1 {
		t.Fatalf("first observer saw %d events, second %d; want %d and %d", len(a), len(b), len(want), len(want)-1)
	}
	for i := range want {
		if a[i] != want[i] {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, a[i], want[i])
		}
		if i > 0 && b[i-1] != want[i] {
			t.Errorf("second observer's event %d: %+v", i-1, b[i-1])
		}
	}
}

// TestCancelled: a cancel is told to the observers and logged at INFO
// with the task's attributes and trace id.
func TestCancelled(t *testing.T) {
	var h observe.Hub[keel.EventKind]
	var got []keel.Event
	h.Add(func(e observe.Event[keel.EventKind]) { got = append(got, keel.Event(e)) })
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	row := &driver.TaskRow{ID: 5, Queue: "q", Type: "t", Attempt: 2, State: driver.StateCancelled,
		Meta: []byte(`{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`)}
	h.Cancelled(context.Background(), log, "node-1", row)
	want := keel.Event{Kind: keel.EventCancelled, TaskID: 5, Queue: "q", Type: "t", Attempt: 2, State: keel.StateCancelled}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	line := buf.String()
	for _, s := range []string{"level=INFO", `msg="keel: task cancelled"`, "task_id=5", "type=t", "queue=q", "attempt=2",
		"node=node-1", "state=cancelled", "trace_id=0af7651916cd43dd8448eb211c80319c"} {
		if !strings.Contains(line, s) {
			t.Errorf("log record %q lacks %q", line, s)
		}
	}
	buf.Reset()
	h.Cancelled(context.Background(), slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})), "n", row)
	if buf.Len() != 0 {
		t.Fatalf("logged below the handler's level: %q", buf.String())
	}
}

// TestHubConcurrent: observers added while events flow (run with -race).
func TestHubConcurrent(t *testing.T) {
	var h observe.Hub[keel.EventKind]
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			h.Add(func(observe.Event[keel.EventKind]) { mu.Lock(); n++; mu.Unlock() })
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				h.Started(engine.AttemptStart{})
			}
		}()
	}
	wg.Wait()
	h.Rescued(engine.Rescue{})
	if n < 4 {
		t.Fatalf("%d events seen after 4 observers were added", n)
	}
}
