package keel

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/conv"
	"github.com/keelq/keel/internal/estimator"
)

// LatencyParams configures Client.Latency; zero fields take their
// defaults.
type LatencyParams struct {
	// Limit is how many of the newest finished tasks to read, at most
	// 10000. Default 1000.
	Limit int
	// Since, when set, leaves out tasks that finished before it. Default
	// zero: any time.
	Since time.Time
}

// AttemptBuckets is how many buckets a distribution of attempts has:
// 1, 2, 3, 4, and 5 or more attempts.
const AttemptBuckets = estimator.AttemptBuckets

// Latency is pickup and run time percentiles and the attempts tasks used,
// computed over a bounded sample: the newest finished (succeeded or dead)
// tasks, read through an index on finish time, never the whole table.
// Cancelled tasks are not in it.
type Latency struct {
	// Sample is how many finished tasks were read: at most the Limit
	// asked for, fewer when fewer finished (since Since).
	Sample int
	// Oldest and Newest are the finish times of the oldest and newest task
	// read; zero when Sample is 0.
	Oldest, Newest time.Time
	// All is the figures over the whole sample, Queues per queue (ordered
	// by name).
	All    LatencyFigures
	Queues []QueueLatency
	// Succeeded and Dead count the sampled tasks of that state by the
	// attempts they used: index 0 is 1 attempt (no retry), 1 two attempts,
	// and so on; the last bucket holds AttemptBuckets attempts or more.
	Succeeded, Dead [AttemptBuckets]int64
}

// LatencyFigures are percentiles of the last attempt of the sampled tasks
// (earlier attempts of a retried task keep no start time):
//
//	pickup    start of the last attempt − when it became due (the later of
//	          created_at and run_at; a retry or snooze moves run_at)
//	run time  finish − start of the last attempt (for a task rescued after
//	          its worker vanished, this includes the lease it waited out)
//
// Percentiles are nearest-rank over Tasks; all zero when Tasks is 0.
type LatencyFigures struct {
	// Tasks is how many sampled tasks have a last attempt start (a task
	// dead-lettered without ever running has none).
	Tasks                int
	PickupP50, PickupP95 time.Duration
	RunP50, RunP95       time.Duration
}

// QueueLatency is one queue's latency figures.
type QueueLatency struct {
	Queue string
	LatencyFigures
}

// Latency computes pickup and run time P50/P95, overall and per queue,
// and the distribution of attempts used by succeeded and dead tasks, over
// the newest p.Limit (default 1000) finished tasks: a bounded read on an
// index, cheap enough for a dashboard that refreshes every few seconds, at
// the cost of describing only the recent past (see Latency.Oldest). keel's
// own tasks (ReservedQueue) read are left out of the figures and Sample.
func (c *Client) Latency(ctx context.Context, p LatencyParams) (*Latency, error) {
	e, err := estimator.ReadLatency(ctx, c.drv, driver.RecentParams(p), IsKeelTask, unavailable)
	if err != nil {
		return nil, err
	}
	return &Latency{Sample: e.Sample, Oldest: e.Oldest, Newest: e.Newest, All: LatencyFigures(e.All), Succeeded: e.Succeeded, Dead: e.Dead,
		Queues: conv.Slice(e.Queues, func(q estimator.QueueLatency) QueueLatency {
			return QueueLatency{Queue: q.Queue, LatencyFigures: LatencyFigures(q.Figures)}
		})}, nil
}
