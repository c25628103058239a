package keel

import (
	"context"
	"time"

	"github.com/keelq/keel/internal/conv"
	"github.com/keelq/keel/internal/estimator"
)

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

// Rates are how many tasks finished (succeeded or dead-lettered) per
// second over the last 1, 5 and 15 minutes, counted over the time the
// queue or type had work in that window (idle minutes do not dilute them).
// A rate is 0 when nothing finished in its window.
type Rates struct {
	M1, M5, M15 float64
}

// TypeStats is one task type's figures within a queue in Stats.
type TypeStats struct {
	Name  string
	Views map[View]int64
	// Counts by state, pending covering every pending view.
	Counts map[State]int64
	Rates  Rates
	// OldestReadyAge is how long the oldest ready task has at least been
	// ready: the live counters keep run times by minute, so it is up to a
	// minute short; 0 when none is ready or it became ready this minute.
	OldestReadyAge time.Duration
	// MeanDuration is the mean run time of the attempts that ended in the
	// last hour; 0 when none did.
	MeanDuration time.Duration
	// DeadLastHour and FailedLastHour count tasks dead-lettered and
	// attempts that failed in the last hour; AttemptsLastHour counts the
	// attempts that ended.
	DeadLastHour, FailedLastHour, AttemptsLastHour int64
	// TimeToDrain estimates how long the ready tasks take to start at the
	// recent rate; 0 when none is ready or there is no rate.
	TimeToDrain time.Duration
	Paused      bool
	// Braked: the type's automatic brake is open or half open, so its
	// tasks wait (TimeToDrain is 0).
	Braked bool
}

// QueueStats is one queue's figures in Stats: its types' figures summed.
type QueueStats struct {
	Name   string
	Counts map[State]int64
	// Views counts the queue's tasks by View, cluster-wide.
	Views map[View]int64
	// OldestReadyAge is how long the oldest ready task has at least been
	// ready (up to a minute short; see TypeStats).
	OldestReadyAge time.Duration
	Rates          Rates
	// PerSecond is Rates.M5.
	PerSecond float64
	// DeadLastHour counts tasks dead-lettered in the last hour.
	DeadLastHour int64
	TimeToDrain  time.Duration
	Paused       bool
	// Served: a live worker process (one whose registry heartbeat is
	// recent) works the queue.
	Served bool
	Types  []TypeStats // ordered by name
}

// KeelStats is keel's own work (ReservedQueue: alert deliveries, on_dead
// hooks, the drill), which Stats keeps apart from users' figures.
type KeelStats struct {
	// QueueStats are the reserved queue's figures, by type
	// ("keel.notify.<notifier>", "keel.on_dead", "keel.drill").
	QueueStats
	// HitsLastHour counts keel's own enqueues in the last hour that found
	// their task already there (an alert delivery enqueued again by
	// another process or round); FailedLastHour its failed attempts.
	HitsLastHour, FailedLastHour int64
	// DeliveriesFailing counts alert deliveries waiting to retry after a
	// failed attempt; DeliveriesDead those dead-lettered (kept like any
	// dead letter).
	DeliveriesFailing, DeliveriesDead int64
}

// Stats is a snapshot of the whole system for dashboards and alerts.
// Every figure but Keel counts users' tasks only.
type Stats struct {
	At     time.Time
	Counts map[State]int64 // every queue but keel's own
	Queues []QueueStats    // ordered by name; keel's own queue is in Keel
	// DeadLastHour counts tasks dead-lettered in the last hour.
	DeadLastHour int64
	// Keel is keel's own work, counted in none of the figures above.
	Keel KeelStats
	// Alert is set while any alert fires; Firing counts the firing
	// alerts by rule (see Client.Alerts).
	Alert  bool
	Firing map[string]int
	Nodes  int // registered worker processes
	// SequencesBlocked counts the sequence keys held by a dead member (see
	// Sequence), at most 1,000.
	SequencesBlocked int
}

// Stats reads the live counters and the last hour's history: counts by
// queue, type, state and view, rates, oldest ready task, dead letters. It
// never reads the task table, so it costs the same with 5,000,000 tasks as
// with 5.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	o, err := estimator.ReadOverview(ctx, estimator.OverviewParams{Snapshots: c.snaps, Alerts: c.drv, LiveWindow: c.cfg.liveWindow(),
		Keel: estimator.Keel{Queue: ReservedQueue, Task: IsKeelTask, NotifyPrefix: notifyTypePrefix}, Wrap: unavailable})
	if err != nil {
		return nil, err
	}
	return &Stats{At: o.At, Counts: conv.Keys[State](o.Counts), Queues: conv.Slice(o.Queues, queueStats), DeadLastHour: o.Dead,
		Keel: KeelStats{QueueStats: queueStats(o.Keel.QueueFigures), HitsLastHour: o.Keel.Hits, FailedLastHour: o.Keel.Failed,
			DeliveriesFailing: o.Keel.DeliveriesFailing, DeliveriesDead: o.Keel.DeliveriesDead},
		Alert: len(o.Firing) > 0, Firing: o.Firing, Nodes: o.Nodes, SequencesBlocked: o.Blocked}, nil
}

// liveWindow is how recent a node's registry heartbeat must be for the
// node to count as live.
func (c Config) liveWindow() time.Duration {
	return max(3*c.HeartbeatInterval, 30*time.Second)
}

// queueStats are a queue's figures, typed.
func queueStats(f estimator.QueueFigures) QueueStats {
	return QueueStats{Name: f.Name, Counts: conv.Keys[State](f.Counts), Views: conv.Keys[View](f.Views), OldestReadyAge: f.OldestReady,
		Rates: Rates(f.Rates), PerSecond: f.Rates.M5, DeadLastHour: f.Dead, TimeToDrain: f.Drain, Paused: f.Paused, Served: f.Served,
		Types: conv.Slice(f.Types, typeStats)}
}

// typeStats are a type's figures, typed.
func typeStats(t estimator.Figures) TypeStats {
	return TypeStats{Name: t.Name, Views: conv.Keys[View](t.Views), Counts: conv.Keys[State](t.Counts),
		Rates: Rates(t.Rates), OldestReadyAge: t.OldestReady, MeanDuration: t.Mean,
		DeadLastHour: t.Dead, FailedLastHour: t.Failed, AttemptsLastHour: t.Ended,
		TimeToDrain: t.Drain, Paused: t.Paused, Braked: t.Braked}
}
