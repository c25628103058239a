package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// The backlog's peak per minute (driver.BacklogStore).

func (e *env) backlogStore() driver.BacklogStore {
	e.t.Helper()
	s, ok := e.drv.(driver.BacklogStore)
	if !ok {
		e.t.Skip("driver does not implement driver.BacklogStore")
	}
	return s
}

// testBacklogPeaks: a minute keeps the largest sample, DropBefore deletes
// older minutes, a bad sample writes nothing, and FirstMinute is the
// history's first minute.
func testBacklogPeaks(t *testing.T, e *env) {
	s := e.backlogStore()
	peaks := func(since int64) []driver.BacklogPeak {
		t.Helper()
		out, err := s.BacklogPeaks(e.ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if _, ok, err := s.FirstMinute(e.ctx); err != nil || ok {
		t.Fatalf("first minute of an empty history: ok %v, err %v", ok, err)
	}
	const m = 29_000_000
	for _, smp := range []driver.BacklogSample{{Minute: m, Pending: 45}, {Minute: m, Pending: 220}, {Minute: m, Pending: 3},
		{Minute: m + 1, Pending: 7}, {Minute: m + 3, Pending: 0}} {
		if err := s.RecordBacklog(e.ctx, smp); err != nil {
			t.Fatal(err)
		}
	}
	want := []driver.BacklogPeak{{Minute: m, Pending: 220}, {Minute: m + 1, Pending: 7}, {Minute: m + 3, Pending: 0}}
	if got := peaks(0); !slices.Equal(got, want) {
		t.Fatalf("peaks %v, want %v", got, want)
	}
	if got := peaks(m + 1); !slices.Equal(got, want[1:]) {
		t.Fatalf("peaks from minute %d: %v, want %v", m+1, got, want[1:])
	}
	for _, bad := range []driver.BacklogSample{{Minute: 0, Pending: 1}, {Minute: m + 5, Pending: -1}, {Minute: m + 5, Pending: 1, DropBefore: m + 6}} {
		if err := s.RecordBacklog(e.ctx, bad); err == nil {
			t.Fatalf("sample %+v stored", bad)
		}
	}
	if err := s.RecordBacklog(e.ctx, driver.BacklogSample{Minute: m + 3, Pending: 5, DropBefore: m + 1}); err != nil {
		t.Fatal(err)
	}
	want = []driver.BacklogPeak{{Minute: m + 1, Pending: 7}, {Minute: m + 3, Pending: 5}}
	if got := peaks(0); !slices.Equal(got, want) {
		t.Fatalf("peaks after dropping minutes before %d: %v, want %v", m+1, got, want)
	}

	first := driver.DueMinute(e.clock.Now())
	e.insert()
	e.clock.Advance(5 * time.Minute)
	e.insert()
	if got, ok, err := s.FirstMinute(e.ctx); err != nil || !ok || got != first {
		t.Fatalf("first minute %d (ok %v, err %v), want %d", got, ok, err, first)
	}
}
