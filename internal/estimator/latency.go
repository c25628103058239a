package estimator

import (
	"maps"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
)

// AttemptBuckets is how many buckets a distribution of attempts has: 1, 2,
// 3, 4, and 5 or more attempts.
const AttemptBuckets = 5

// Latency is pickup and run time percentiles and the attempts tasks used,
// over a sample of finished tasks (keel's Latency, whose fields it
// mirrors).
type Latency struct {
	Sample         int
	Oldest, Newest time.Time
	All            LatencyFigures
	Queues         []QueueLatency // ordered by name
	// Succeeded and Dead count the tasks of that state by the attempts
	// they used: index 0 is 1 attempt, the last AttemptBuckets or more.
	Succeeded, Dead [AttemptBuckets]int64
}

// LatencyFigures are nearest-rank percentiles of the last attempt of the
// sampled tasks: pickup is its start less when it became due (the later
// of created_at and run_at), run time its finish less its start. Tasks
// counts the tasks with a start; all zero when it is 0.
type LatencyFigures struct {
	Tasks                int
	PickupP50, PickupP95 time.Duration
	RunP50, RunP95       time.Duration
}

// QueueLatency is one queue's latency figures.
type QueueLatency struct {
	Queue   string
	Figures LatencyFigures
}

// LatencyOf computes Latency from finished tasks in any order.
func LatencyOf(rows []driver.FinishedSample) Latency {
	l := Latency{Sample: len(rows)}
	type durations struct{ pickup, run []time.Duration }
	all := &durations{}
	byQueue := map[string]*durations{}
	for _, r := range rows {
		if l.Oldest.IsZero() || r.FinishedAt.Before(l.Oldest) {
			l.Oldest = r.FinishedAt
		}
		if r.FinishedAt.After(l.Newest) {
			l.Newest = r.FinishedAt
		}
		b := min(max(r.Attempt, 1), AttemptBuckets) - 1
		switch r.State {
		case driver.StateSucceeded:
			l.Succeeded[b]++
		case driver.StateDead:
			l.Dead[b]++
		}
		q := byQueue[r.Queue]
		if q == nil {
			q = &durations{}
			byQueue[r.Queue] = q
		}
		if r.AttemptedAt.IsZero() {
			continue
		}
		due := r.CreatedAt
		if r.RunAt.After(due) {
			due = r.RunAt
		}
		// Clocks of different nodes may disagree by a little: never below 0.
		pickup, run := max(r.AttemptedAt.Sub(due), 0), max(r.FinishedAt.Sub(r.AttemptedAt), 0)
		for _, d := range []*durations{all, q} {
			d.pickup, d.run = append(d.pickup, pickup), append(d.run, run)
		}
	}
	figures := func(d *durations) LatencyFigures {
		slices.Sort(d.pickup)
		slices.Sort(d.run)
		return LatencyFigures{Tasks: len(d.pickup),
			PickupP50: Percentile(d.pickup, 50), PickupP95: Percentile(d.pickup, 95),
			RunP50: Percentile(d.run, 50), RunP95: Percentile(d.run, 95)}
	}
	l.All = figures(all)
	for _, name := range slices.Sorted(maps.Keys(byQueue)) {
		l.Queues = append(l.Queues, QueueLatency{Queue: name, Figures: figures(byQueue[name])})
	}
	return l
}

// Percentile is the nearest-rank p-th percentile of sorted; 0 when empty.
func Percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 × n), at least 1
	return sorted[max(rank, 1)-1]
}
