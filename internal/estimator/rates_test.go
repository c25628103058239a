package estimator

import (
	"math"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// TestBusyRate: a queue that drained at 10 tasks/s for 110 s and then sat
// idle shows 10/s over the 5 and 15 minutes, not the tasks divided by the
// window; a window that cuts a busy minute counts its share.
func TestBusyRate(t *testing.T) {
	a := int64(29_000_000) // a minute
	at := func(minute int64, sec int) time.Time { return time.Unix(minute*60+int64(sec), 0) }
	ms := func(minute int64, sec int) int64 { return at(minute, sec).UnixMilli() }
	hist := []driver.MinuteRow{
		// Busy from a:30 to (a+2):20, ends spread evenly.
		{Minute: a, Attempts: 300, Ended: 300, Succeeded: 300, FirstMS: ms(a, 30), LastMS: ms(a, 59)},
		{Minute: a + 1, Attempts: 600, Ended: 600, Succeeded: 590, Dead: 10, FirstMS: ms(a+1, 0), LastMS: ms(a+1, 59)},
		{Minute: a + 2, Attempts: 200, Ended: 200, Succeeded: 200, FirstMS: ms(a+2, 0), LastMS: ms(a+2, 20)},
	}
	now := at(a+4, 0) // 100s idle since the last end
	for _, w := range []time.Duration{5 * time.Minute, 15 * time.Minute} {
		r := BusyRate(hist, now, w, FinishedIn)
		if math.Abs(r.PerSecond-10) > 1e-9 || r.Busy != 110*time.Second {
			t.Fatalf("window %v: %v/s over %v, want 10/s over 110s", w, r.PerSecond, r.Busy)
		}
	}
	// The last 3 minutes start at (a+1):00: minute a is out, the rest in.
	if r := BusyRate(hist, now, 3*time.Minute, FinishedIn); math.Abs(r.PerSecond-10) > 1e-9 || r.Busy != 80*time.Second {
		t.Fatalf("3 minutes: %v/s over %v, want 10/s over 80s", r.PerSecond, r.Busy)
	}
	// At (a+2):30 the last 80s start at (a+1):10: 50 of minute a+1's 60
	// busy seconds count, with their share of its tasks, and minute a+2,
	// the current one, counts to now.
	if r := BusyRate(hist, at(a+2, 30), 80*time.Second, FinishedIn); math.Abs(r.N-700) > 1e-9 || r.Busy != 80*time.Second {
		t.Fatalf("last 80s at (a+2):30: %v tasks over %v, want 700 (500 of minute a+1, all 200 of a+2) over 80s", r.N, r.Busy)
	}
	// Idle for the whole window: no rate.
	if r := BusyRate(hist, at(a+10, 0), time.Minute, FinishedIn); r.PerSecond != 0 || r.Busy != 0 {
		t.Fatalf("idle minute: %+v", r)
	}
	// A burst whose first attempts end in the next minute: 2 claims at
	// a:59.8, then 10/s from (a+1):00. Minute a adds its claims and no
	// time (from its start it added 60s: 1.5/s).
	edge := []driver.MinuteRow{
		{Minute: a, Attempts: 2},
		{Minute: a + 1, Attempts: 100, Ended: 100, Succeeded: 100, FirstMS: ms(a+1, 0), LastMS: ms(a+1, 10)},
	}
	if r := BusyRate(edge, at(a+1, 10), 5*time.Minute, ClaimedIn); r.Busy != 10*time.Second || math.Abs(r.PerSecond-10.2) > 1e-9 {
		t.Fatalf("burst begun at the end of a minute: %v/s over %v, want 10.2/s over 10s", r.PerSecond, r.Busy)
	}
	// Claims only, in the current minute: no busy time yet.
	if r := BusyRate(edge[:1], at(a, 59), time.Minute, ClaimedIn); r.Busy != 0 || r.N != 2 {
		t.Fatalf("claims only in the current minute: %+v, want 2 over no time", r)
	}
	// The current minute counts up to now.
	cur := []driver.MinuteRow{{Minute: a, Attempts: 50, Ended: 50, Succeeded: 50, FirstMS: ms(a, 10), LastMS: ms(a, 14)}}
	if r := BusyRate(cur, at(a, 15), time.Minute, FinishedIn); math.Abs(r.PerSecond-10) > 1e-9 {
		t.Fatalf("current minute: %v/s, want 10/s (50 over the 5s from the first end)", r.PerSecond)
	}
}
