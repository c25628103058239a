package estimator_test

import (
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

// TestQueueFigures: a queue's figures sum its types'; a type's figures
// count its own rows; a braked type has no drain time, the queue still
// does.
func TestQueueFigures(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)
	m := t0.Unix() / 60
	first, last := t0.Add(-20*time.Second).UnixMilli(), t0.UnixMilli()
	s := &estimator.Snapshot{
		At: t0,
		Counts: []driver.CountRow{
			{Queue: queue, Type: "b", Kind: string(driver.StatePending), Due: m - 2, N: 40}, // ready since 11:59
			{Queue: queue, Type: "a", Kind: string(driver.StatePending), Due: m, N: 10},
			{Queue: queue, Type: "a", Kind: string(driver.StatePending), Due: m + 5, N: 3},
			{Queue: queue, Type: "a", Kind: driver.KindRetrying, Due: m + 1, N: 2},
			{Queue: queue, Type: "a", Kind: string(driver.StateRunning), N: 4},
			{Queue: queue, Type: "b", Kind: string(driver.StateDead), N: 6},
			{Queue: "other", Type: "a", Kind: string(driver.StatePending), Due: m, N: 1000},
		},
		Minutes: []driver.MinuteRow{
			{Minute: m, Queue: queue, Type: "a", Attempts: 100, Ended: 100, Succeeded: 95, Failed: 5, DurationMS: 100 * 40, FirstMS: first, LastMS: last},
			{Minute: m, Queue: queue, Type: "b", Attempts: 100, Ended: 100, Succeeded: 99, Failed: 1, Dead: 1, DurationMS: 100 * 20, FirstMS: first, LastMS: last},
			{Minute: m, Queue: queue, Type: "c", Attempts: 1, Ended: 1, Succeeded: 1, DurationMS: 7, FirstMS: first, LastMS: first},
		},
		Settings: []driver.Setting{{Kind: driver.SettingType, Name: "a", Paused: true}},
		Nodes:    []driver.NodeRow{node(t0, 2)},
		Braked:   map[string]driver.BrakeRow{"b": {Type: "b", State: driver.BrakeOpen}},
	}
	q := s.Queue(queue, 30*time.Second)
	if q.Name != queue || !q.Served || q.Paused || q.Braked {
		t.Fatalf("queue %+v", q)
	}
	want := map[string]int64{estimator.ViewReady: 50, estimator.ViewScheduled: 3, estimator.ViewRetrying: 2, estimator.ViewRunning: 4, estimator.ViewDead: 6}
	for v, n := range want {
		if q.Views[v] != n {
			t.Errorf("queue view %s: %d, want %d", v, q.Views[v], n)
		}
	}
	if q.Counts["pending"] != 55 || q.Counts["running"] != 4 || q.Counts["dead"] != 6 {
		t.Errorf("queue counts %v", q.Counts)
	}
	// Ready since the end of 11:58 at the latest: 90 s at 12:00:30.
	if q.OldestReady != 90*time.Second {
		t.Errorf("oldest ready %v, want 90s", q.OldestReady)
	}
	// 201 claims in the 20 s since the first end: 50 ready drain in ~5 s.
	if q.Dead != 1 || q.Failed != 6 || q.Ended != 201 || q.Mean != 29*time.Millisecond ||
		(q.Drain-50*20*time.Second/201).Abs() > time.Millisecond || q.Rates.M5 <= 0 {
		t.Errorf("queue figures %+v", q.Figures)
	}
	if len(q.Types) != 3 || q.Types[0].Name != "a" || q.Types[1].Name != "b" || q.Types[2].Name != "c" {
		t.Fatalf("types %+v, want a, b, c", q.Types)
	}
	a, b, c := q.Types[0], q.Types[1], q.Types[2]
	if !a.Paused || a.Braked || a.Views[estimator.ViewReady] != 10 || a.Failed != 5 || a.Mean != 40*time.Millisecond ||
		(a.Drain-10*20*time.Second/100).Abs() > time.Millisecond || a.OldestReady != 0 {
		t.Errorf("type a %+v", a)
	}
	if b.Paused || !b.Braked || b.Drain != 0 || b.Views[estimator.ViewReady] != 40 || b.Dead != 1 || b.Mean != 20*time.Millisecond {
		t.Errorf("type b (braked) %+v", b)
	}
	if c.Views[estimator.ViewReady] != 0 || c.Ended != 1 || c.Mean != 7*time.Millisecond || c.Drain != 0 {
		t.Errorf("type c (history only) %+v", c)
	}
	if e := s.Queue("empty", 30*time.Second); e.Served || len(e.Types) != 0 || len(e.Views) != 0 {
		t.Errorf("a queue without rows: %+v", e)
	}
}
