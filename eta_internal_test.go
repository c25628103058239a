package keel

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// etaDriver serves the reads an estimate makes from fixed rows; any other
// call panics (the embedded nil Driver).
type etaDriver struct {
	driver.Driver
	minutes []driver.MinuteRow
	nodes   []driver.NodeRow
	counts  []driver.CountRow // nil: both slots busy with type t
	same    int64             // CountAhead's answer; 0: 20
}

func (d *etaDriver) Counts(context.Context) ([]driver.CountRow, error) {
	if d.counts != nil {
		return d.counts, nil
	}
	return []driver.CountRow{{Queue: DefaultQueue, Type: "t", Kind: string(StateRunning), N: 2}}, nil
}
func (d *etaDriver) Minutes(context.Context, time.Time) ([]driver.MinuteRow, error) {
	return d.minutes, nil
}
func (d *etaDriver) ListSettings(context.Context) ([]driver.Setting, error) { return nil, nil }
func (d *etaDriver) ListNodes(context.Context) ([]driver.NodeRow, error)    { return d.nodes, nil }
func (d *etaDriver) CountAhead(context.Context, driver.AheadParams) (int64, error) {
	if d.same != 0 {
		return max(d.same, 0), nil
	}
	return 20, nil
}

// TestEstimateRateEndsAtTheHistoryRead: the rate an estimate measures
// covers the time its history covers. 60 claims in the 6 s since the first
// end are 10/s; 0.9 s later the cached history (still 60 claims) says the
// same, where measuring to the later now made it 60 in 6.9 s, 8.7/s.
func TestEstimateRateEndsAtTheHistoryRead(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	now := t0.Add(16 * time.Second)
	d := &etaDriver{
		minutes: []driver.MinuteRow{{Minute: t0.Unix() / 60, Queue: DefaultQueue, Type: "t", Attempts: 60, Ended: 58,
			Succeeded: 58, DurationMS: 58 * 200, FirstMS: t0.Add(10 * time.Second).UnixMilli(), LastMS: now.UnixMilli()}},
		nodes: []driver.NodeRow{{Name: "n", Queues: []string{DefaultQueue}, Workers: map[string]int{DefaultQueue: 2},
			StartedAt: t0, HeartbeatAt: now}},
	}
	c, err := NewClient(Config{Driver: d, Types: []string{"t"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	task := &TaskInfo{ID: 1, Queue: DefaultQueue, Type: "t", State: StatePending, RunAt: t0}
	for _, after := range []time.Duration{0, 900 * time.Millisecond} {
		now = t0.Add(16*time.Second + after)
		e, err := c.Estimate(context.Background(), task)
		if err != nil {
			t.Fatal(err)
		}
		// 20 ahead, both slots busy: the 21st start from now, at 10/s.
		if e.Status != ETAEstimated || math.Abs(e.PerSecond-10) > 1e-9 || !e.Start.Equal(now.Add(2100*time.Millisecond)) {
			t.Errorf("%v after the history was read: %s at %v/s, start in %v; want 10/s, start in 2.1s",
				after, e.Status, e.PerSecond, e.Start.Sub(now))
		}
	}
}

// TestEstimateWeighsTheTypesAhead is seed 003's mixed queue: reports of
// 0.2 s drain at 2 workers (10 starts a second) when notifications of
// priority 10 that take 1 ms arrive. The line ahead of a task counts each
// task at its own type's run time, in tasks of the queue's mean (0.198 s):
// 19 notifications ahead are 0.1 of a task, so the 20th waits for the next
// free worker and little more, 0.11 s at the queue's 10 starts a second.
// Counted whole, they made it 0.1 s per notification ahead (the 20th was
// told 2 s and started at once).
func TestEstimateWeighsTheTypesAhead(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	now := t0.Add(40 * time.Second)
	minute := t0.Unix() / 60
	d := &etaDriver{
		minutes: []driver.MinuteRow{
			{Minute: minute, Queue: DefaultQueue, Type: "report", Attempts: 300, Ended: 298, Succeeded: 298, DurationMS: 298 * 200,
				FirstMS: t0.Add(10 * time.Second).UnixMilli(), LastMS: now.UnixMilli()},
			{Minute: minute, Queue: DefaultQueue, Type: "notify", Attempts: 2, Ended: 2, Succeeded: 2, DurationMS: 2,
				FirstMS: t0.Add(39 * time.Second).UnixMilli(), LastMS: now.UnixMilli()},
		},
		nodes: []driver.NodeRow{{Name: "n", Queues: []string{DefaultQueue}, Workers: map[string]int{DefaultQueue: 2},
			StartedAt: t0, HeartbeatAt: now}},
		counts: []driver.CountRow{
			{Queue: DefaultQueue, Type: "report", Kind: string(StateRunning), N: 2},
			{Queue: DefaultQueue, Type: "report", Kind: string(StatePending), Priority: 0, Due: minute, N: 200},
			{Queue: DefaultQueue, Type: "notify", Kind: string(StatePending), Priority: 10, Due: minute, N: 20},
		},
	}
	c, err := NewClient(Config{Driver: d, Types: []string{"report", "notify"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for _, c2 := range []struct {
		task  *TaskInfo
		same  int64 // of its priority, ready before it in its minute
		start time.Duration
	}{
		// The first notification: only the running reports' rest.
		{&TaskInfo{ID: 301, Queue: DefaultQueue, Type: "notify", Priority: 10, State: StatePending, RunAt: t0}, -1, 100 * time.Millisecond},
		// The 20th: 19 notifications of 1 ms ahead too.
		{&TaskInfo{ID: 320, Queue: DefaultQueue, Type: "notify", Priority: 10, State: StatePending, RunAt: t0}, 19, 109500 * time.Microsecond},
		// A report behind 150 reports and the 20 notifications: 150 × 0.2 s
		// + 20 × 1 ms + the running rest, on 2 workers.
		{&TaskInfo{ID: 151, Queue: DefaultQueue, Type: "report", State: StatePending, RunAt: t0}, 150, 15110 * time.Millisecond},
	} {
		d.same = c2.same
		e, err := c.Estimate(context.Background(), c2.task)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != ETAEstimated || (e.Start.Sub(now)-c2.start).Abs() > max(time.Millisecond, c2.start/100) {
			t.Errorf("task %d (%s): %s, starts in %v; want in %v", c2.task.ID, c2.task.Type, e.Status, e.Start.Sub(now), c2.start)
		}
	}
}
