package estimator_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

// minutes serves the history's rows; since is what it was asked for.
type minutes struct {
	rows  []driver.MinuteRow
	err   error
	since time.Time
}

func (m *minutes) Minutes(_ context.Context, since time.Time) ([]driver.MinuteRow, error) {
	m.since = since
	return m.rows, m.err
}

// backlogged is a history that also keeps backlog peaks.
type backlogged struct {
	minutes
	first     int64 // FirstMinute; 0: none held
	peaks     []driver.BacklogPeak
	peakSince int64
}

func (b *backlogged) RecordBacklog(context.Context, driver.BacklogSample) error {
	panic("History only reads")
}

func (b *backlogged) BacklogPeaks(_ context.Context, since int64) ([]driver.BacklogPeak, error) {
	b.peakSince = since
	return b.peaks, nil
}

func (b *backlogged) FirstMinute(context.Context) (int64, bool, error) {
	return b.first, b.first != 0, nil
}

// t0 is a multiple of 5 minutes since the epoch.
var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func minute(t time.Time) int64 { return t.Unix() / 60 }

// TestHistorySteps: minutes are summed into the step they fall in, rows
// Skip accepts and rows outside the steps are left out, every step is
// present, and a store without backlog peaks marks none.
func TestHistorySteps(t *testing.T) {
	at := func(m int) int64 { return minute(t0.Add(time.Duration(m) * time.Minute)) }
	s := &minutes{rows: []driver.MinuteRow{
		{Minute: at(0), Queue: "a", Type: "x", Enqueued: 2, Succeeded: 1, DurationMS: 10},
		{Minute: at(4), Queue: "b", Type: "y", Enqueued: 3, Attempts: 4, Failed: 1, Ended: 2},
		{Minute: at(4), Queue: "keel", Type: "keel.tick", Enqueued: 100},
		{Minute: at(7), Queue: "a", Type: "x", Dead: 1, Cancelled: 2, Hits: 5, DurationMS: 7},
		{Minute: at(-5), Queue: "a", Type: "x", Enqueued: 1000},
		{Minute: at(15), Queue: "a", Type: "x", Enqueued: 1000},
	}}
	skip := func(queue, _ string) bool { return queue == "keel" }
	got, err := estimator.History(context.Background(), s, estimator.HistoryParams{First: t0, Step: 5 * time.Minute, N: 3, Skip: skip})
	if err != nil {
		t.Fatal(err)
	}
	if !s.since.Equal(t0) {
		t.Errorf("read minutes since %v, want %v", s.since, t0)
	}
	want := []estimator.Point{
		{At: t0, Enqueued: 5, Succeeded: 1, Attempts: 4, Failed: 1, Ended: 2, DurationMS: 10},
		{At: t0.Add(5 * time.Minute), Dead: 1, Cancelled: 2, Hits: 5, DurationMS: 7},
		{At: t0.Add(10 * time.Minute)},
	}
	if len(got) != len(want) {
		t.Fatalf("%d points, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("point %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	s.err = errors.New("down")
	if _, err := estimator.History(context.Background(), s, estimator.HistoryParams{First: t0, Step: time.Minute, N: 1}); !errors.Is(err, s.err) {
		t.Errorf("a failed read: %v", err)
	}
}

// TestHistoryBacklogPeaks: a step's peak is the largest sample in it and
// only a step with a sample is Sampled; steps that end at or before the
// first minute held are Unrecorded, and all are when none is held.
func TestHistoryBacklogPeaks(t *testing.T) {
	at := func(m int) int64 { return minute(t0.Add(time.Duration(m) * time.Minute)) }
	s := &backlogged{first: at(3), peaks: []driver.BacklogPeak{
		{Minute: at(3), Pending: 4}, {Minute: at(5), Pending: 9}, {Minute: at(6), Pending: 2}, {Minute: at(9), Pending: 0},
		{Minute: at(12), Pending: 50}, // past the last step
	}}
	p := estimator.HistoryParams{First: t0, Step: 3 * time.Minute, N: 4}
	got, err := estimator.History(context.Background(), s, p)
	if err != nil {
		t.Fatal(err)
	}
	if s.peakSince != minute(t0) {
		t.Errorf("read peaks since minute %d, want %d", s.peakSince, minute(t0))
	}
	type step struct {
		peak                int64
		sampled, unrecorded bool
	}
	want := []step{{0, false, true}, {9, true, false}, {2, true, false}, {0, true, false}}
	for i, w := range want {
		if g := (step{got[i].PendingPeak, got[i].Sampled, got[i].Unrecorded}); g != w {
			t.Errorf("step %d: %+v, want %+v", i, g, w)
		}
	}
	s.first = 0
	got, err = estimator.History(context.Background(), s, p)
	if err != nil {
		t.Fatal(err)
	}
	for i, pt := range got {
		if !pt.Unrecorded {
			t.Errorf("step %d recorded with no history held", i)
		}
	}
}
