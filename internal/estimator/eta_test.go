package estimator_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

const queue = "default"

var (
	_ estimator.Store     = driver.Driver(nil) // the real drivers fit
	_ estimator.LineStore = driver.Driver(nil)
)

// store serves the reads of a snapshot and of an estimate from fixed rows
// and counts them.
type store struct {
	counts   []driver.CountRow // nil: both slots busy with type t
	minutes  []driver.MinuteRow
	settings []driver.Setting
	nodes    []driver.NodeRow
	brakes   []driver.BrakeRow
	same     int64           // CountAhead's answer; 0: 20, below 0: 0
	byID     map[int64]int64 // CountAhead's answer by task id, over same
	err      error           // returned by CountAhead

	countReads, minuteReads, aheadReads int
}

func (s *store) Counts(context.Context) ([]driver.CountRow, error) {
	s.countReads++
	if s.counts != nil {
		return s.counts, nil
	}
	return []driver.CountRow{{Queue: queue, Type: "t", Kind: string(driver.StateRunning), N: 2}}, nil
}

func (s *store) Minutes(context.Context, time.Time) ([]driver.MinuteRow, error) {
	s.minuteReads++
	return s.minutes, nil
}

func (s *store) ListSettings(context.Context) ([]driver.Setting, error) { return s.settings, nil }
func (s *store) ListNodes(context.Context) ([]driver.NodeRow, error)    { return s.nodes, nil }
func (s *store) ListBrakes(context.Context) ([]driver.BrakeRow, error)  { return s.brakes, nil }
func (s *store) ChangeBrake(context.Context, driver.BrakeChange) (bool, error) {
	panic("not an estimator's call")
}
func (s *store) SetBrakeConfig(context.Context, driver.BrakeConfigParams) error {
	panic("not an estimator's call")
}

func (s *store) CountAhead(_ context.Context, p driver.AheadParams) (int64, error) {
	s.aheadReads++
	if s.err != nil {
		return 0, s.err
	}
	if n, ok := s.byID[p.ID]; ok {
		return n, nil
	}
	if s.same != 0 {
		return max(s.same, 0), nil
	}
	return 20, nil
}

// clock is the time the estimator reads; tests move it by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// newEstimator returns an estimator over st as a client wires it (live
// window 30 s, no workers of its own).
func newEstimator(st *store, clk *clock) *estimator.Estimator {
	return estimator.New(estimator.Config{
		Snapshots:  &estimator.Reader{Store: st, Now: clk.Now},
		Store:      st,
		Now:        clk.Now,
		LiveWindow: 30 * time.Second,
	})
}

// node is a live node at now with workers for queue.
func node(now time.Time, workers int) driver.NodeRow {
	return driver.NodeRow{Name: "n", Queues: []string{queue}, Workers: map[string]int{queue: workers}, StartedAt: now.Add(-time.Hour), HeartbeatAt: now}
}

func pending(id int64, typ string, priority int, runAt time.Time) estimator.Task {
	return estimator.Task{ID: id, Queue: queue, Type: typ, Priority: priority, RunAt: runAt}
}

func estimateOne(t *testing.T, e *estimator.Estimator, task estimator.Task) estimator.ETA {
	t.Helper()
	es, err := e.Estimate(context.Background(), []estimator.Task{task})
	if err != nil {
		t.Fatal(err)
	}
	return es[0]
}

// TestRateEndsAtTheHistoryRead: the rate an estimate measures covers the
// time its history covers. 60 claims in the 6 s since the first end are
// 10/s; 0.9 s later the cached history (still 60 claims) says the same,
// where measuring to the later now made it 60 in 6.9 s, 8.7/s.
func TestRateEndsAtTheHistoryRead(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := &clock{now: t0.Add(16 * time.Second)}
	st := &store{
		minutes: []driver.MinuteRow{{Minute: t0.Unix() / 60, Queue: queue, Type: "t", Attempts: 60, Ended: 58,
			Succeeded: 58, DurationMS: 58 * 200, FirstMS: t0.Add(10 * time.Second).UnixMilli(), LastMS: clk.now.UnixMilli()}},
		nodes: []driver.NodeRow{node(clk.now, 2)},
	}
	e := newEstimator(st, clk)
	task := pending(1, "t", 0, t0)
	for _, after := range []time.Duration{0, 900 * time.Millisecond} {
		clk.now = t0.Add(16*time.Second + after)
		eta := estimateOne(t, e, task)
		// 20 ahead, both slots busy: the 21st start from now, at 10/s.
		if eta.Status != estimator.Estimated || math.Abs(eta.PerSecond-10) > 1e-9 || !eta.Start.Equal(clk.now.Add(2100*time.Millisecond)) {
			t.Errorf("%v after the history was read: %s at %v/s, start in %v; want 10/s, start in 2.1s",
				after, eta.Status, eta.PerSecond, eta.Start.Sub(clk.now))
		}
	}
	if st.minuteReads != 1 {
		t.Errorf("history read %d times, want once (kept for a second)", st.minuteReads)
	}
	if st.countReads != 3 {
		t.Errorf("counters read %d times, want 3 (the snapshot's, then fresh for each estimate)", st.countReads)
	}
}

// TestWeighsTheTypesAhead is a mixed queue: reports of 0.2 s drain at 2
// workers (10 starts a second) when notifications of priority 10 that take
// 1 ms arrive. The line ahead of a task counts each task at its own type's
// run time, in tasks of the queue's mean (0.198 s): 19 notifications ahead
// are 0.1 of a task, so the 20th waits for the next free worker and little
// more, 0.11 s at the queue's 10 starts a second. Counted whole, they made
// it 0.1 s per notification ahead (the 20th was told 2 s and started at
// once).
func TestWeighsTheTypesAhead(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := &clock{now: t0.Add(40 * time.Second)}
	minute := t0.Unix() / 60
	st := &store{
		minutes: []driver.MinuteRow{
			{Minute: minute, Queue: queue, Type: "report", Attempts: 300, Ended: 298, Succeeded: 298, DurationMS: 298 * 200,
				FirstMS: t0.Add(10 * time.Second).UnixMilli(), LastMS: clk.now.UnixMilli()},
			{Minute: minute, Queue: queue, Type: "notify", Attempts: 2, Ended: 2, Succeeded: 2, DurationMS: 2,
				FirstMS: t0.Add(39 * time.Second).UnixMilli(), LastMS: clk.now.UnixMilli()},
		},
		nodes: []driver.NodeRow{node(clk.now, 2)},
		counts: []driver.CountRow{
			{Queue: queue, Type: "report", Kind: string(driver.StateRunning), N: 2},
			{Queue: queue, Type: "report", Kind: string(driver.StatePending), Priority: 0, Due: minute, N: 200},
			{Queue: queue, Type: "notify", Kind: string(driver.StatePending), Priority: 10, Due: minute, N: 20},
		},
	}
	e := newEstimator(st, clk)
	for _, c := range []struct {
		task  estimator.Task
		same  int64 // of its priority, ready before it in its minute
		start time.Duration
	}{
		// The first notification: only the running reports' rest.
		{pending(301, "notify", 10, t0), -1, 100 * time.Millisecond},
		// The 20th: 19 notifications of 1 ms ahead too.
		{pending(320, "notify", 10, t0), 19, 109500 * time.Microsecond},
		// A report behind 150 reports and the 20 notifications: 150 × 0.2 s
		// + 20 × 1 ms + the running rest, on 2 workers.
		{pending(151, "report", 0, t0), 150, 15110 * time.Millisecond},
	} {
		st.same = c.same
		eta := estimateOne(t, e, c.task)
		if eta.Status != estimator.Estimated || (eta.Start.Sub(clk.now)-c.start).Abs() > max(time.Millisecond, c.start/100) {
			t.Errorf("task %d (%s): %s, starts in %v; want in %v", c.task.ID, c.task.Type, eta.Status, eta.Start.Sub(clk.now), c.start)
		}
	}
}

// TestFastBehindSlow: fast tasks (10 ms) queued behind slow ones (1 s) of
// another type in one queue wait for the slow ones' run time, not for as
// many tasks of the queue's mean (0.505 s). The queue has run for 4 s on
// its 2 workers, too short to measure: it starts 2 tasks per 0.505 s.
func TestFastBehindSlow(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)
	clk := &clock{now: t0}
	minute := t0.Unix() / 60
	first, last := t0.Add(-4*time.Second).UnixMilli(), t0.UnixMilli()
	st := &store{
		minutes: []driver.MinuteRow{
			{Minute: minute, Queue: queue, Type: "slow", Attempts: 12, Ended: 10, Succeeded: 10, DurationMS: 10 * 1000, FirstMS: first, LastMS: last},
			{Minute: minute, Queue: queue, Type: "fast", Attempts: 10, Ended: 10, Succeeded: 10, DurationMS: 10 * 10, FirstMS: first, LastMS: last},
		},
		nodes: []driver.NodeRow{node(t0, 2)},
		counts: []driver.CountRow{
			{Queue: queue, Type: "slow", Kind: string(driver.StateRunning), N: 2},
			{Queue: queue, Type: "slow", Kind: string(driver.StatePending), Due: minute - 1, N: 10},
			{Queue: queue, Type: "fast", Kind: string(driver.StatePending), Due: minute, N: 5},
		},
	}
	e := newEstimator(st, clk)
	for _, c := range []struct {
		task   estimator.Task
		same   int64
		ahead  int64
		start  time.Duration
		finish time.Duration
	}{
		// The last slow task: 9 slow ones ahead and the running rest, on
		// 2 workers: (9 × 1 s + 0.505 s) / 2.
		{pending(10, "slow", 0, t0.Add(-time.Minute)), 9, 9, 4752500 * time.Microsecond, time.Second},
		// The 5th fast task, of the next minute: all 10 slow ones and 4
		// fast ones ahead: (10 × 1 s + 4 × 10 ms + 0.505 s) / 2. Counted
		// as 14 tasks of the queue's mean it was told 3.79 s.
		{pending(15, "fast", 0, t0.Add(-20*time.Second)), 4, 14, 5272500 * time.Microsecond, 10 * time.Millisecond},
	} {
		st.same = c.same
		eta := estimateOne(t, e, c.task)
		if eta.Status != estimator.Estimated || eta.Ahead != c.ahead || math.Abs(eta.PerSecond-2/0.505) > 1e-9 {
			t.Fatalf("%s task: %+v; want estimated, %d ahead, %v/s", c.task.Type, eta, c.ahead, 2/0.505)
		}
		if got := eta.Start.Sub(t0); (got - c.start).Abs() > time.Millisecond {
			t.Errorf("%s task starts in %v, want in %v", c.task.Type, got, c.start)
		}
		if got := eta.Finish.Sub(eta.Start); got != c.finish {
			t.Errorf("%s task runs for %v, want its type's mean %v", c.task.Type, got, c.finish)
		}
	}
}

// TestHeld: a paused queue or type, a braked type and a queue no live node
// works hold a task whatever the line ahead: the snapshot answers, without
// the fresh counters or an index read.
func TestHeld(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := &clock{now: t0}
	until := t0.Add(20 * time.Second)
	st := &store{
		settings: []driver.Setting{{Kind: driver.SettingQueue, Name: "paused", Paused: true}, {Kind: driver.SettingType, Name: "paused.type", Paused: true}},
		nodes: []driver.NodeRow{
			{Name: "n", Queues: []string{queue, "paused"}, Workers: map[string]int{queue: 2, "paused": 1}, HeartbeatAt: t0},
			{Name: "gone", Queues: []string{"lost"}, Workers: map[string]int{"lost": 4}, HeartbeatAt: t0.Add(-31 * time.Second)},
		},
		brakes: []driver.BrakeRow{
			{Type: "open", State: driver.BrakeOpen, Until: until},
			{Type: "half", State: driver.BrakeHalfOpen, Until: t0.Add(-time.Second)},
			{Type: "paused.type", State: driver.BrakeOpen, Until: until},
		},
	}
	e := newEstimator(st, clk)
	tasks := []estimator.Task{
		{ID: 1, Queue: "paused", Type: "t", RunAt: t0},
		{ID: 2, Queue: queue, Type: "paused.type", RunAt: t0}, // paused before braked
		{ID: 3, Queue: queue, Type: "open", RunAt: t0},
		{ID: 4, Queue: queue, Type: "half", RunAt: t0},
		{ID: 5, Queue: "lost", Type: "t", RunAt: t0},      // its node's heartbeat is 31 s old
		{ID: 6, Queue: "unknown", Type: "t", RunAt: t0},   // no node at all
		{ID: 7, Queue: "paused", Type: "t", RunAt: until}, // scheduled and paused
		{ID: 8, Queue: "lost", Type: "open", RunAt: t0},   // braked before unserved
	}
	es, err := e.Estimate(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	want := []estimator.ETA{
		{Status: estimator.Paused},
		{Status: estimator.Paused},
		{Status: estimator.Braked, Brake: driver.BrakeOpen, NextProbe: until},
		{Status: estimator.Braked, Brake: driver.BrakeHalfOpen, NextProbe: t0}, // probes run now
		{Status: estimator.NoWorker},
		{Status: estimator.NoWorker},
		{Status: estimator.Paused},
		{Status: estimator.Braked, Brake: driver.BrakeOpen, NextProbe: until},
	}
	for i := range want {
		if es[i] != want[i] {
			t.Errorf("task %d: %+v, want %+v", tasks[i].ID, es[i], want[i])
		}
	}
	if st.countReads != 1 || st.aheadReads != 0 {
		t.Errorf("counters read %d times and %d index reads; want the snapshot's read only", st.countReads, st.aheadReads)
	}
}

// TestNoHistory: with no run time yet, a task that a free worker takes
// starts now, and one behind busy workers has no estimate. The history is
// read again when the kept snapshot has none (it may have come in since),
// and the first run times make the estimate.
func TestNoHistory(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)
	clk := &clock{now: t0}
	minute := t0.Unix() / 60
	st := &store{nodes: []driver.NodeRow{node(t0, 2)}, counts: []driver.CountRow{}, same: -1}
	e := newEstimator(st, clk)
	task := pending(1, "t", 0, t0)
	if eta := estimateOne(t, e, task); eta.Status != estimator.Estimated || !eta.Start.Equal(t0) || !eta.Finish.Equal(t0) || eta.PerSecond != 0 {
		t.Errorf("empty queue: %+v, want to start now", eta)
	}
	// 1 ahead and no task running: the second worker takes this one.
	st.counts = []driver.CountRow{{Queue: queue, Type: "t", Kind: string(driver.StatePending), Due: minute - 1, N: 1}}
	if eta := estimateOne(t, e, task); eta.Status != estimator.Estimated || !eta.Start.Equal(t0) || eta.Ahead != 1 {
		t.Errorf("a free worker: %+v, want to start now", eta)
	}
	// One running: the free worker takes the one ahead, and no rate says
	// when the next is free.
	st.counts = append(st.counts, driver.CountRow{Queue: queue, Type: "t", Kind: string(driver.StateRunning), N: 1})
	if eta := estimateOne(t, e, task); eta.Status != estimator.Unknown || !eta.Start.IsZero() || eta.Ahead != 1 {
		t.Errorf("no free worker, no history: %+v, want unknown", eta)
	}
	if st.minuteReads != 4 {
		t.Fatalf("history read %d times; want the snapshot's and once per estimate without a run time", st.minuteReads)
	}
	// The first run time arrives (2 s); the kept snapshot has none.
	clk.now = t0.Add(500 * time.Millisecond)
	st.minutes = []driver.MinuteRow{{Minute: minute, Queue: queue, Type: "t", Attempts: 3, Ended: 1, Succeeded: 1, DurationMS: 2000,
		FirstMS: t0.UnixMilli(), LastMS: t0.UnixMilli()}}
	eta := estimateOne(t, e, task)
	// 2 workers of 2 s tasks start 1 a second: this one starts when the
	// running one ends, in 1 s.
	if eta.Status != estimator.Estimated || eta.PerSecond != 1 || !eta.Start.Equal(clk.now.Add(time.Second)) || eta.Finish.Sub(eta.Start) != 2*time.Second {
		t.Errorf("first run time: %+v, want 1/s, start in 1s, run 2s", eta)
	}
}

// TestEstimateMany: tasks of every kind at once come back in their order,
// with one fresh read of the counters and two index reads for a group of
// one queue, priority and minute (a task given twice is placed once).
func TestEstimateMany(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)
	clk := &clock{now: t0}
	minute := t0.Unix() / 60
	st := &store{
		minutes: []driver.MinuteRow{{Minute: minute, Queue: queue, Type: "t", Attempts: 100, Ended: 100, Succeeded: 100, DurationMS: 100 * 100,
			FirstMS: t0.Add(-20 * time.Second).UnixMilli(), LastMS: t0.UnixMilli()}},
		settings: []driver.Setting{{Kind: driver.SettingType, Name: "paused", Paused: true}},
		nodes:    []driver.NodeRow{node(t0, 1)},
		counts: []driver.CountRow{
			{Queue: queue, Type: "t", Kind: string(driver.StateRunning), N: 1},
			{Queue: queue, Type: "t", Kind: string(driver.StatePending), Due: minute, N: 30},
		},
		byID: map[int64]int64{1: 10, 3: 12},
	}
	e := newEstimator(st, clk)
	if es, err := e.Estimate(context.Background(), nil); err != nil || len(es) != 0 || st.countReads != 0 {
		t.Fatalf("no tasks: %v, %v, %d reads", es, err, st.countReads)
	}
	later := t0.Add(time.Hour)
	tasks := []estimator.Task{
		pending(3, "t", 0, t0),
		pending(9, "paused", 0, t0),
		pending(1, "t", 0, t0),
		pending(5, "t", 0, later),
		pending(2, "t", 0, t0),
		pending(1, "t", 0, t0),
		{ID: 7, Queue: "nobody", Type: "t", RunAt: t0},
	}
	es, err := e.Estimate(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != len(tasks) {
		t.Fatalf("%d estimates for %d tasks", len(es), len(tasks))
	}
	// 5 starts a second (100 claims in 20 s); one worker, busy: task 1,
	// with 10 ahead, starts in 11 × 0.2 s, task 2 in 12 × 0.2 s.
	for i, want := range []struct {
		status estimator.Status
		ahead  int64
		start  time.Time
	}{
		{estimator.Estimated, 12, t0.Add(2600 * time.Millisecond)},
		{estimator.Paused, 0, time.Time{}},
		{estimator.Estimated, 10, t0.Add(2200 * time.Millisecond)},
		{estimator.Estimated, 0, later},
		{estimator.Estimated, 11, t0.Add(2400 * time.Millisecond)},
		{estimator.Estimated, 10, t0.Add(2200 * time.Millisecond)},
		{estimator.NoWorker, 0, time.Time{}},
	} {
		got := es[i]
		if got.Status != want.status || got.Ahead != want.ahead || (got.Start.Sub(want.start)).Abs() > time.Millisecond {
			t.Errorf("task %d: %s, %d ahead, start %v; want %s, %d ahead, start %v", tasks[i].ID,
				got.Status, got.Ahead, got.Start.Sub(t0), want.status, want.ahead, want.start.Sub(t0))
		}
	}
	if st.countReads != 2 || st.aheadReads != 2 {
		t.Errorf("%d counter reads and %d index reads, want 2 (snapshot, fresh) and 2", st.countReads, st.aheadReads)
	}
	// A failed index read fails the call.
	st.err = errors.New("connection refused")
	if _, err := e.Estimate(context.Background(), tasks[:1]); !errors.Is(err, st.err) {
		t.Errorf("index read failed: %v", err)
	}
}

// TestEstimateManyPlacesTheTasksBetween: of a batch's tasks of one queue,
// priority and minute, the first and the last are placed by index reads
// and the ones between by their order, each behind its share of the other
// tasks the reads found between the two; past ManyGroups such groups, the
// counters place a group's tasks behind the other tasks of their minute.
func TestEstimateManyPlacesTheTasksBetween(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := &clock{now: t0.Add(40 * time.Second)}
	minute := t0.Unix() / 60
	st := &store{
		minutes: []driver.MinuteRow{{Minute: minute, Queue: queue, Type: "t", Attempts: 10, Ended: 10, Succeeded: 10,
			DurationMS: 10 * 100, FirstMS: t0.UnixMilli(), LastMS: clk.now.UnixMilli()}},
		nodes: []driver.NodeRow{node(clk.now, 1)},
		counts: []driver.CountRow{{Queue: queue, Type: "t", Kind: string(driver.StatePending), Priority: 0, Due: minute, N: 23},
			{Queue: queue, Type: "t", Kind: string(driver.StatePending), Priority: 1, Due: minute, N: 1}},
		// 10 tasks ahead of the first, 8 others between it and the last.
		byID: map[int64]int64{101: 10, 105: 22},
	}
	e := newEstimator(st, clk)
	var ts []estimator.Task
	for id := int64(105); id >= 101; id-- { // out of line order
		ts = append(ts, pending(id, "t", 0, t0))
	}
	// A second group of one (another priority): one read.
	ts = append(ts, pending(200, "t", 1, t0))
	st.byID[200] = 0
	es, err := e.Estimate(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	// Priority 1 comes first: the tasks of priority 0 have it ahead too.
	for i, want := range []int64{23, 20, 17, 14, 11, 0} {
		if es[i].Ahead != want {
			t.Errorf("task %d: %d ahead, want %d", ts[i].ID, es[i].Ahead, want)
		}
	}
	if st.aheadReads != 3 {
		t.Errorf("%d index reads, want 3", st.aheadReads)
	}

	// 40 groups of one task each (40 priorities, 5 counted tasks each):
	// ManyGroups are read, the other 8 are placed behind their priority's
	// 4 others the counters hold.
	st.aheadReads, st.byID, st.same, st.counts = 0, nil, -1, nil
	ts = ts[:0]
	for p := range 40 {
		st.counts = append(st.counts, driver.CountRow{Queue: queue, Type: "t", Kind: string(driver.StatePending), Priority: -p, Due: minute, N: 5})
		ts = append(ts, pending(int64(300+p), "t", -p, t0))
	}
	if es, err = e.Estimate(context.Background(), ts); err != nil {
		t.Fatal(err)
	}
	if st.aheadReads != estimator.ManyGroups {
		t.Errorf("%d index reads for 40 groups of one, want %d", st.aheadReads, estimator.ManyGroups)
	}
	for p, eta := range es {
		want := int64(5 * p) // the higher priorities
		if p >= estimator.ManyGroups {
			want += 4
		}
		if eta.Ahead != want {
			t.Errorf("task of priority %d: %d ahead, want %d", -p, eta.Ahead, want)
		}
	}
}

// TestTypeWithoutHistory: a type that had not run when the kept snapshot
// was read is estimated from its first run time once that arrives, not at
// the queue's mean, which a fast type's runs set (a 0.5 s task was told it
// runs 50 ms, and the task behind it that it starts in 12 ms).
func TestTypeWithoutHistory(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 30, 0, time.UTC)
	clk := &clock{now: t0}
	minute := t0.Unix() / 60
	fast := driver.MinuteRow{Minute: minute, Queue: queue, Type: "fast", Attempts: 10, Ended: 10, Succeeded: 10, DurationMS: 500,
		FirstMS: t0.Add(-5 * time.Second).UnixMilli(), LastMS: t0.UnixMilli()}
	st := &store{nodes: []driver.NodeRow{node(t0, 2)}, minutes: []driver.MinuteRow{fast}, same: -1,
		counts: []driver.CountRow{{Queue: queue, Type: "slow", Kind: string(driver.StateRunning), N: 2}}}
	e := newEstimator(st, clk)
	task := pending(1, "slow", 0, t0)
	estimateOne(t, e, task) // the snapshot is kept from here
	// The slow type's first two runs end (0.5 s each) within the kept
	// snapshot's age.
	clk.now = t0.Add(500 * time.Millisecond)
	slow := driver.MinuteRow{Minute: minute, Queue: queue, Type: "slow", Attempts: 4, Ended: 2, Succeeded: 2, DurationMS: 1000,
		FirstMS: clk.now.UnixMilli(), LastMS: clk.now.UnixMilli()}
	st.minutes = []driver.MinuteRow{fast, slow}
	eta := estimateOne(t, e, task)
	if eta.Status != estimator.Estimated || eta.Finish.Sub(eta.Start) != 500*time.Millisecond {
		t.Fatalf("slow task after its type's first runs: %+v, want a run of 500ms", eta)
	}
}
