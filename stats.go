package keel

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
)

// throughputWindow is how far back Stats and ETA look for the rate at which
// a queue's tasks finish.
const throughputWindow = 5 * time.Minute

// AlertDeadPerHour: more dead letters than this in the last hour raise
// Stats.Alert (seed 003 §4.2).
const AlertDeadPerHour = 3

// A View is a gauge of a queue's tasks: the states, with pending split by
// when the task can run.
type View string

// The views of QueueStats.Views (and the keel_tasks metric's state label).
const (
	ViewReady     View = "ready"     // pending, run_at reached
	ViewScheduled View = "scheduled" // pending, never attempted, run_at ahead
	ViewRetrying  View = "retrying"  // pending after a failed attempt, run_at ahead
	ViewRunning   View = "running"
	ViewDead      View = "dead"
)

// QueueStats is one queue's figures in Stats.
type QueueStats struct {
	Name   string
	Counts map[State]int64
	// Views counts the queue's tasks by View, cluster-wide.
	Views map[View]int64
	// OldestReadyAge is how long the oldest ready task has been ready (to
	// the minute); 0 when none is ready.
	OldestReadyAge time.Duration
	// PerSecond is how many of the queue's tasks finished (succeeded or
	// dead) per second over the last five minutes.
	PerSecond float64
	// DeadLastHour counts tasks dead-lettered in the last hour.
	DeadLastHour int64
}

// Stats is a snapshot of the whole system for dashboards and alerts.
type Stats struct {
	At     time.Time
	Counts map[State]int64 // every queue
	Queues []QueueStats    // ordered by name
	// DeadLastHour counts tasks dead-lettered in the last hour; Alert is
	// set when it is above AlertDeadPerHour.
	DeadLastHour int64
	Alert        bool
	Nodes        int // registered worker processes
}

// Stats counts tasks by queue and state, the recent throughput and the
// dead letters of the last hour.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	now := c.cfg.Now()
	queues, err := c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	finished, err := c.drv.CountFinished(ctx, now.Add(-time.Hour))
	if err != nil {
		return nil, fmt.Errorf("keel: count finished tasks: %w", unavailable(ctx, err))
	}
	recent, err := c.drv.CountFinished(ctx, now.Add(-throughputWindow))
	if err != nil {
		return nil, fmt.Errorf("keel: count finished tasks: %w", unavailable(ctx, err))
	}
	nodes, err := c.drv.ListNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("keel: list nodes: %w", unavailable(ctx, err))
	}
	s := &Stats{At: now, Counts: map[State]int64{}, Nodes: len(nodes)}
	idx := map[string]int{}
	for _, q := range queues {
		idx[q.Name] = len(s.Queues)
		s.Queues = append(s.Queues, QueueStats{Name: q.Name, Counts: q.Counts})
		for st, n := range q.Counts {
			s.Counts[st] += n
		}
	}
	for _, r := range finished {
		if i, ok := idx[r.Queue]; ok && r.State == StateDead {
			s.Queues[i].DeadLastHour += r.Count
			s.DeadLastHour += r.Count
		}
	}
	for q, rate := range finishRates(recent) {
		if i, ok := idx[q]; ok {
			s.Queues[i].PerSecond = rate
		}
	}
	s.Alert = s.DeadLastHour > AlertDeadPerHour
	return s, nil
}

// ETA estimates when a pending task will start: from the ready tasks ahead
// of it in its queue (higher priority, or same priority and earlier) and
// the rate at which the queue's tasks finished over the last five minutes
// (seed 003 §3.1). ok is false when there is no estimate: the task is not
// pending, no registered worker process serves its queue, or tasks wait
// ahead of it and none finished recently.
func (c *Client) ETA(ctx context.Context, t *TaskInfo) (eta time.Time, ok bool, err error) {
	if t == nil || t.State != StatePending {
		return time.Time{}, false, nil
	}
	now := c.cfg.Now()
	served, rate, err := c.etaInputs(ctx, t.Queue, now)
	if err != nil || !served {
		return time.Time{}, false, err
	}
	if t.RunAt.After(now) {
		// Scheduled: the backlog at that time cannot be known yet.
		return t.RunAt, true, nil
	}
	ahead, err := c.drv.CountAhead(ctx, driver.AheadParams{Queue: t.Queue, Priority: t.Priority, RunAt: t.RunAt, ID: t.ID, Now: now})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("keel: estimate start: %w", unavailable(ctx, err))
	}
	if ahead == 0 {
		return now, true, nil
	}
	if rate <= 0 {
		return time.Time{}, false, nil
	}
	return now.Add(time.Duration(float64(ahead) / rate * float64(time.Second))), true, nil
}

// etaCache holds what ETA reads besides a task's place in line: the
// queues some registered node serves and each queue's recent finish rate,
// read together at most every 2s so a burst of ETA requests costs two
// queries.
type etaCache struct {
	mu     sync.Mutex
	at     time.Time
	served map[string]bool
	rates  map[string]float64 // finished per second over throughputWindow
}

// etaInputs reports whether a registered worker process serves queue and
// the queue's recent finish rate per second.
func (c *Client) etaInputs(ctx context.Context, queue string, now time.Time) (served bool, rate float64, err error) {
	e := &c.eta
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.served == nil || now.Sub(e.at) > 2*time.Second || now.Before(e.at) {
		nodes, err := c.drv.ListNodes(ctx)
		if err != nil {
			return false, 0, fmt.Errorf("keel: list nodes: %w", unavailable(ctx, err))
		}
		rows, err := c.drv.CountFinished(ctx, now.Add(-throughputWindow))
		if err != nil {
			return false, 0, fmt.Errorf("keel: count finished tasks: %w", unavailable(ctx, err))
		}
		e.served = map[string]bool{}
		for _, n := range nodes {
			for _, q := range n.Queues {
				e.served[q] = true
			}
		}
		e.rates, e.at = finishRates(rows), now
	}
	return e.served[queue], e.rates[queue], nil
}

// finishRates turns counts of tasks finished over throughputWindow into
// rates per second by queue.
func finishRates(rows []driver.QueueCount) map[string]float64 {
	rates := map[string]float64{}
	for _, r := range rows {
		rates[r.Queue] += float64(r.Count) / throughputWindow.Seconds()
	}
	return rates
}
