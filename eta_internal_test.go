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
}

// Counts: both slots busy.
func (d *etaDriver) Counts(context.Context) ([]driver.CountRow, error) {
	return []driver.CountRow{{Queue: DefaultQueue, Type: "t", Kind: string(StateRunning), N: 2}}, nil
}
func (d *etaDriver) Minutes(context.Context, time.Time) ([]driver.MinuteRow, error) {
	return d.minutes, nil
}
func (d *etaDriver) ListSettings(context.Context) ([]driver.Setting, error) { return nil, nil }
func (d *etaDriver) ListNodes(context.Context) ([]driver.NodeRow, error)    { return d.nodes, nil }
func (d *etaDriver) CountAhead(context.Context, driver.AheadParams) (int64, error) {
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
