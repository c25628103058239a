package estimator_test

import (
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

// TestLatencyOf: pickup is the last attempt's start less the later of
// created_at and run_at, run time its finish less its start; P50 and P95
// are nearest-rank; attempts fall in buckets 1..4 and 5+.
func TestLatencyOf(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	var rows []driver.FinishedSample
	// Queue a: 20 tasks, created at 0, due at 0 (run_at before created_at
	// counts from created_at), picked up after i seconds, running 2i
	// seconds, succeeded on the first attempt.
	for i := 1; i <= 20; i++ {
		rows = append(rows, driver.FinishedSample{Queue: "a", State: driver.StateSucceeded, Attempt: 1,
			CreatedAt: s(0), RunAt: s(-5), AttemptedAt: s(i), FinishedAt: s(3 * i)})
	}
	// Queue b: a task retried (due again at 100, started 104, done 105),
	// one dead after 7 attempts, one that never ran, one whose start
	// precedes its due time (clock skew: pickup 0).
	rows = append(rows,
		driver.FinishedSample{Queue: "b", State: driver.StateSucceeded, Attempt: 2, CreatedAt: s(0), RunAt: s(100), AttemptedAt: s(104), FinishedAt: s(105)},
		driver.FinishedSample{Queue: "b", State: driver.StateDead, Attempt: 7, CreatedAt: s(0), RunAt: s(200), AttemptedAt: s(210), FinishedAt: s(240)},
		driver.FinishedSample{Queue: "b", State: driver.StateDead, Attempt: 0, CreatedAt: s(0), RunAt: s(0), FinishedAt: s(1)},
		driver.FinishedSample{Queue: "b", State: driver.StateSucceeded, Attempt: 4, CreatedAt: s(10), RunAt: s(10), AttemptedAt: s(9), FinishedAt: s(11)},
	)
	l := estimator.LatencyOf(rows)
	if l.Sample != 24 || !l.Oldest.Equal(s(1)) || !l.Newest.Equal(s(240)) {
		t.Fatalf("sample %d from %v to %v", l.Sample, l.Oldest, l.Newest)
	}
	if l.Succeeded != [estimator.AttemptBuckets]int64{20, 1, 0, 1, 0} || l.Dead != [estimator.AttemptBuckets]int64{1, 0, 0, 0, 1} {
		t.Fatalf("attempts: succeeded %v dead %v", l.Succeeded, l.Dead)
	}
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	if len(l.Queues) != 2 || l.Queues[0].Queue != "a" || l.Queues[1].Queue != "b" {
		t.Fatalf("queues %+v", l.Queues)
	}
	// a: pickups 1..20 s, runs 2..40 s: P50 is the 10th, P95 the 19th.
	if got, want := l.Queues[0].Figures, (estimator.LatencyFigures{Tasks: 20, PickupP50: sec(10), PickupP95: sec(19), RunP50: sec(20), RunP95: sec(38)}); got != want {
		t.Errorf("queue a: %+v, want %+v", got, want)
	}
	// b: pickups 0, 4, 10 s; runs 1, 2, 30 s (the task that never ran is
	// not timed).
	if got, want := l.Queues[1].Figures, (estimator.LatencyFigures{Tasks: 3, PickupP50: sec(4), PickupP95: sec(10), RunP50: sec(2), RunP95: sec(30)}); got != want {
		t.Errorf("queue b: %+v, want %+v", got, want)
	}
	// All 23 timed: pickups 0,1..20,4,10 sorted → 12th is 10 s (0,1,...,
	// with 4 and 10 twice), 22nd is 19 s.
	if got, want := l.All, (estimator.LatencyFigures{Tasks: 23, PickupP50: sec(10), PickupP95: sec(19), RunP50: sec(20), RunP95: sec(38)}); got != want {
		t.Errorf("all: %+v, want %+v", got, want)
	}
	if e := estimator.LatencyOf(nil); e.Sample != 0 || e.All != (estimator.LatencyFigures{}) || e.Queues != nil {
		t.Errorf("empty: %+v", e)
	}
}

func TestPercentile(t *testing.T) {
	d := []time.Duration{1, 2, 3, 4}
	for _, c := range []struct{ p, want int }{{50, 2}, {95, 4}, {1, 1}, {100, 4}} {
		if got := estimator.Percentile(d, c.p); got != time.Duration(c.want) {
			t.Errorf("P%d of 1..4: %v, want %v", c.p, got, c.want)
		}
	}
	if estimator.Percentile([]time.Duration{7}, 95) != 7 || estimator.Percentile(nil, 50) != 0 {
		t.Error("one value or none")
	}
}
