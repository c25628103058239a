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
	byID    map[int64]int64   // CountAhead's answer by task id, over same
	reads   int               // CountAhead calls
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
func (d *etaDriver) CountAhead(_ context.Context, p driver.AheadParams) (int64, error) {
	d.reads++
	if n, ok := d.byID[p.ID]; ok {
		return n, nil
	}
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

// TestEstimateManyPlacesTheTasksBetween: of a batch's tasks of one queue,
// priority and minute, the first and the last are placed by index reads
// and the ones between by their order, each behind its share of the other
// tasks the reads found between the two; past 32 such groups, the
// counters place a group's tasks behind the other tasks of their minute.
func TestEstimateManyPlacesTheTasksBetween(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	now := t0.Add(40 * time.Second)
	minute := t0.Unix() / 60
	d := &etaDriver{
		minutes: []driver.MinuteRow{{Minute: minute, Queue: DefaultQueue, Type: "t", Attempts: 10, Ended: 10, Succeeded: 10,
			DurationMS: 10 * 100, FirstMS: t0.UnixMilli(), LastMS: now.UnixMilli()}},
		nodes: []driver.NodeRow{{Name: "n", Queues: []string{DefaultQueue}, Workers: map[string]int{DefaultQueue: 1},
			StartedAt: t0, HeartbeatAt: now}},
		counts: []driver.CountRow{{Queue: DefaultQueue, Type: "t", Kind: string(StatePending), Priority: 0, Due: minute, N: 23},
			{Queue: DefaultQueue, Type: "t", Kind: string(StatePending), Priority: 1, Due: minute, N: 1}},
		// 10 tasks ahead of the first, 8 others between it and the last.
		byID: map[int64]int64{101: 10, 105: 22},
	}
	c, err := NewClient(Config{Driver: d, Types: []string{"t"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var ts []*TaskInfo
	for id := int64(105); id >= 101; id-- { // out of line order
		ts = append(ts, &TaskInfo{ID: id, Queue: DefaultQueue, Type: "t", State: StatePending, RunAt: t0})
	}
	// A second group of one (another priority): one read.
	ts = append(ts, &TaskInfo{ID: 200, Queue: DefaultQueue, Type: "t", Priority: 1, State: StatePending, RunAt: t0})
	d.byID[200] = 0
	es, err := c.EstimateMany(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	// Priority 1 comes first: the tasks of priority 0 have it ahead too.
	for i, want := range []int64{23, 20, 17, 14, 11, 0} {
		if es[i].Ahead != want {
			t.Errorf("task %d: %d ahead, want %d", ts[i].ID, es[i].Ahead, want)
		}
	}
	if d.reads != 3 {
		t.Errorf("%d index reads, want 3", d.reads)
	}

	// 40 groups of one task each (40 priorities, 5 counted tasks each):
	// 32 are read, the other 8 are placed behind their priority's 4
	// others the counters hold.
	d.reads, d.byID, d.same, d.counts = 0, nil, -1, nil
	ts = ts[:0]
	for p := range 40 {
		d.counts = append(d.counts, driver.CountRow{Queue: DefaultQueue, Type: "t", Kind: string(StatePending), Priority: -p, Due: minute, N: 5})
		ts = append(ts, &TaskInfo{ID: int64(300 + p), Queue: DefaultQueue, Type: "t", Priority: -p, State: StatePending, RunAt: t0})
	}
	if es, err = c.EstimateMany(context.Background(), ts); err != nil {
		t.Fatal(err)
	}
	if d.reads != etaManyGroups {
		t.Errorf("%d index reads for 40 groups of one, want %d", d.reads, etaManyGroups)
	}
	for p, e := range es {
		want := int64(5 * p) // the higher priorities
		if p >= etaManyGroups {
			want += 4
		}
		if e.Ahead != want {
			t.Errorf("task of priority %d: %d ahead, want %d", -p, e.Ahead, want)
		}
	}
}
