package estimator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
)

// Overview is the figures of keel's Stats: the users' queues, and keel's
// own work kept apart.
type Overview struct {
	At time.Time
	// Nodes counts the registered worker processes.
	Nodes int
	// Counts counts the users' tasks by state (CountState), every queue
	// but keel's own.
	Counts map[string]int64
	// Queues are the users' queues' figures, ordered by name.
	Queues []QueueFigures
	// Dead counts the users' tasks dead-lettered in the last hour.
	Dead int64
	Keel KeelFigures
	// Firing counts the alerts that fire, by rule.
	Firing map[string]int
	// Blocked counts the sequence keys held by a dead member (at most
	// MaxBlocked).
	Blocked int
}

// KeelFigures are the figures of keel's own work (keel's KeelStats).
type KeelFigures struct {
	// QueueFigures are the reserved queue's.
	QueueFigures
	// Hits and Failed count keel's own enqueues in the last hour that
	// found their task already there, and its failed attempts.
	Hits, Failed int64
	// DeliveriesFailing counts alert deliveries waiting to retry after a
	// failed attempt, DeliveriesDead those dead-lettered.
	DeliveriesFailing, DeliveriesDead int64
}

// Keel names keel's own work, which an Overview keeps apart.
type Keel struct {
	// Queue is keel's reserved queue.
	Queue string
	// Task reports whether tasks of a queue and type are keel's own.
	Task func(queue, taskType string) bool
	// NotifyPrefix begins the types of alert deliveries.
	NotifyPrefix string
}

// AlertStore is what ReadOverview reads beyond the snapshot.
type AlertStore interface {
	ListAlerts(ctx context.Context, filter driver.AlertFilter) ([]driver.AlertRow, error)
}

// OverviewParams wires ReadOverview.
type OverviewParams struct {
	Snapshots *Reader
	Alerts    AlertStore
	// LiveWindow is how recent a node's registry heartbeat must be for
	// the node to count as live.
	LiveWindow time.Duration
	Keel       Keel
	// Wrap turns the alerts' read error into the error returned; nil
	// keeps it.
	Wrap func(ctx context.Context, err error) error
}

// ReadOverview reads a fresh snapshot and the firing alerts (at most
// 1000 of them), and returns their Overview.
func ReadOverview(ctx context.Context, p OverviewParams) (*Overview, error) {
	snap, err := p.Snapshots.Read(ctx, 0)
	if err != nil {
		return nil, err
	}
	o := snap.Overview(p.LiveWindow, p.Keel)
	open, err := p.Alerts.ListAlerts(ctx, driver.AlertFilter{Open: true, Limit: 1000})
	if err != nil {
		if p.Wrap != nil {
			err = p.Wrap(ctx, err)
		}
		return nil, fmt.Errorf("keel: list firing alerts: %w", err)
	}
	o.Firing = map[string]int{}
	for _, a := range open {
		o.Firing[a.Rule]++
	}
	return &o, nil
}

// Overview returns the figures of s; window is how recent a node's
// heartbeat must be for it to count as live. Firing is left nil.
func (s *Snapshot) Overview(window time.Duration, k Keel) Overview {
	o := Overview{At: s.At, Nodes: len(s.Nodes), Counts: map[string]int64{}, Blocked: len(s.Blocked)}
	for _, name := range s.QueueNames() {
		if name == k.Queue {
			continue
		}
		q := s.Queue(name, window)
		for st, n := range q.Counts {
			o.Counts[st] += n
		}
		o.Dead += q.Dead
		o.Queues = append(o.Queues, q)
	}
	o.Keel.QueueFigures = s.Queue(k.Queue, window)
	since := driver.DueMinute(s.At.Add(-time.Hour))
	for _, m := range s.Minutes {
		if m.Minute >= since && k.Task(m.Queue, m.Type) {
			o.Keel.Hits += m.Hits
			o.Keel.Failed += m.Failed
		}
	}
	for _, r := range s.Counts {
		if r.Queue != k.Queue || !strings.HasPrefix(r.Type, k.NotifyPrefix) {
			continue
		}
		switch r.Kind {
		case driver.KindRetrying:
			o.Keel.DeliveriesFailing += r.N
		case string(driver.StateDead):
			o.Keel.DeliveriesDead += r.N
		}
	}
	return o
}
