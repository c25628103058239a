package keel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
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
}

// Stats reads the live counters and the last hour's history: counts by
// queue, type, state and view, rates, oldest ready task, dead letters. It
// never reads the task table, so it costs the same with 5,000,000 tasks as
// with 5.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	snap, err := c.snapshot(ctx, 0)
	if err != nil {
		return nil, err
	}
	now := snap.at
	s := &Stats{At: now, Counts: map[State]int64{}, Nodes: len(snap.nodes)}
	s.Keel = snap.keelStats(c.liveWindow())
	for _, name := range snap.queueNames() {
		if reservedQueue(name) {
			continue
		}
		q := snap.queueStats(name, c.liveWindow())
		for st, n := range q.Counts {
			s.Counts[st] += n
		}
		s.DeadLastHour += q.DeadLastHour
		s.Queues = append(s.Queues, q)
	}
	open, err := c.drv.ListAlerts(ctx, driver.AlertFilter{Open: true, Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("keel: list firing alerts: %w", unavailable(ctx, err))
	}
	s.Firing = map[string]int{}
	for _, a := range open {
		s.Firing[a.Rule]++
	}
	s.Alert = len(open) > 0
	return s, nil
}

// liveWindow is how recent a node's registry heartbeat must be for the
// node to count as live.
func (c *Client) liveWindow() time.Duration {
	return max(3*c.cfg.HeartbeatInterval, 30*time.Second)
}

// snapshot is what Stats and ETA read: the live counters, the last hour's
// history, the settings and the node registry, as of at.
type snapshot struct {
	at       time.Time
	counts   []driver.CountRow
	minutes  []driver.MinuteRow
	settings []driver.Setting
	nodes    []driver.NodeRow
	workers  map[string]int // this client's workers per queue
	// braked are the brakes that are open or half open, by type.
	braked map[string]driver.BrakeRow
}

// snapshotCache keeps the last snapshot for ETA, so that a burst of
// submits costs four small reads every second, not four per submit.
type snapshotCache struct {
	mu   sync.Mutex
	snap *snapshot
}

// snapshot reads a snapshot, or returns the cached one when it is younger
// than maxAge (0: always read).
func (c *Client) snapshot(ctx context.Context, maxAge time.Duration) (*snapshot, error) {
	now := c.cfg.Now()
	if maxAge > 0 {
		c.snaps.mu.Lock()
		defer c.snaps.mu.Unlock()
		if s := c.snaps.snap; s != nil && !now.Before(s.at) && now.Sub(s.at) < maxAge {
			return s, nil
		}
	}
	s := &snapshot{at: now, workers: map[string]int{}}
	var err error
	if s.counts, err = c.drv.Counts(ctx); err != nil {
		return nil, fmt.Errorf("keel: read live counters: %w", unavailable(ctx, err))
	}
	if s.minutes, err = c.drv.Minutes(ctx, now.Add(-time.Hour)); err != nil {
		return nil, fmt.Errorf("keel: read task history: %w", unavailable(ctx, err))
	}
	if s.settings, err = c.drv.ListSettings(ctx); err != nil {
		return nil, fmt.Errorf("keel: list settings: %w", unavailable(ctx, err))
	}
	if s.nodes, err = c.drv.ListNodes(ctx); err != nil {
		return nil, fmt.Errorf("keel: list nodes: %w", unavailable(ctx, err))
	}
	if b, ok := c.drv.(driver.Braker); ok {
		brakes, err := b.ListBrakes(ctx)
		if err != nil {
			return nil, fmt.Errorf("keel: list brakes: %w", unavailable(ctx, err))
		}
		for _, r := range brakes {
			if r.State == driver.BrakeOpen || r.State == driver.BrakeHalfOpen {
				if s.braked == nil {
					s.braked = map[string]driver.BrakeRow{}
				}
				s.braked[r.Type] = r
			}
		}
	}
	for q := range c.cfg.Queues {
		s.workers[q] = c.workers(q)
	}
	if maxAge > 0 {
		c.snaps.snap = s
	}
	return s, nil
}

// queueNames are the queues with counters or history, sorted.
func (s *snapshot) queueNames() []string {
	seen := map[string]bool{}
	for _, r := range s.counts {
		seen[r.Queue] = true
	}
	for _, m := range s.minutes {
		seen[m.Queue] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.SortFunc(names, compareStrings)
	return names
}

func (s *snapshot) paused(kind driver.SettingKind, name string) bool {
	for _, st := range s.settings {
		if st.Kind == kind && st.Name == name {
			return st.Paused
		}
	}
	return false
}

// served reports whether a live node works queue.
func (s *snapshot) served(queue string, window time.Duration) bool {
	if s.workers[queue] > 0 {
		return true
	}
	for _, n := range s.nodes {
		if s.at.Sub(n.HeartbeatAt) <= window && slices.Contains(n.Queues, queue) {
			return true
		}
	}
	return false
}

// slots is how many of queue's tasks the live nodes run at once: the
// nodes' workers for it, capped by the queue's concurrency setting (which
// holds across the cluster). A client that works the queue but is not
// registered yet counts its own.
func (s *snapshot) slots(queue string, window time.Duration) int {
	limit := 0
	for _, st := range s.settings {
		if st.Kind == driver.SettingQueue && st.Name == queue {
			limit = st.Concurrency
		}
	}
	n := 0
	for _, node := range s.nodes {
		if s.at.Sub(node.HeartbeatAt) > window {
			continue
		}
		n += node.Workers[queue]
	}
	if n == 0 {
		n = s.workers[queue]
	}
	if limit > 0 {
		n = min(n, limit)
	}
	return n
}

// views fills the views and oldest ready age of the counter rows that
// match keep.
func (s *snapshot) views(keep func(r driver.CountRow) bool) (views map[View]int64, counts map[State]int64, oldest time.Duration) {
	views, counts = map[View]int64{}, map[State]int64{}
	nowMinute := driver.DueMinute(s.at)
	oldestDue := int64(0)
	for _, r := range s.counts {
		if !keep(r) {
			continue
		}
		counts[kindState(r.Kind)] += r.N
		switch {
		case r.Kind == string(StateRunning):
			views[ViewRunning] += r.N
		case r.Kind == string(StateDead):
			views[ViewDead] += r.N
		case r.Kind != string(StatePending) && r.Kind != driver.KindRetrying:
		case r.Due <= nowMinute:
			views[ViewReady] += r.N
			if r.N > 0 && (oldestDue == 0 || r.Due < oldestDue) {
				oldestDue = r.Due
			}
		case r.Kind == driver.KindRetrying:
			views[ViewRetrying] += r.N
		default:
			views[ViewScheduled] += r.N
		}
	}
	if oldestDue != 0 {
		// Run times are counted by minute: the oldest ready task became
		// ready within minute oldestDue, so it has waited at least since
		// that minute's end.
		oldest = max(0, s.at.Sub(time.Unix((oldestDue+1)*60, 0)))
	}
	return views, counts, oldest
}

// history sums the history rows that match keep by minute.
func (s *snapshot) history(keep func(m driver.MinuteRow) bool) []driver.MinuteRow {
	var out []driver.MinuteRow
	for _, m := range s.minutes {
		if !keep(m) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Minute == m.Minute {
			out[n-1].Add(m)
			continue
		}
		out = append(out, m)
	}
	return out
}

func (s *snapshot) queueStats(name string, window time.Duration) QueueStats {
	q := QueueStats{Name: name, Paused: s.paused(driver.SettingQueue, name), Served: s.served(name, window)}
	q.Views, q.Counts, q.OldestReadyAge = s.views(func(r driver.CountRow) bool { return r.Queue == name })
	hist := s.history(func(m driver.MinuteRow) bool { return m.Queue == name })
	q.Rates = rates(hist, s.at, finishedIn)
	q.PerSecond = q.Rates.M5
	for _, m := range hist {
		q.DeadLastHour += m.Dead
	}
	q.TimeToDrain = drain(q.Views[ViewReady], busyRate(hist, s.at, 5*time.Minute, claimedIn))
	types := map[string]bool{}
	for _, r := range s.counts {
		if r.Queue == name {
			types[r.Type] = true
		}
	}
	for _, m := range s.minutes {
		if m.Queue == name {
			types[m.Type] = true
		}
	}
	for t := range types {
		ts := TypeStats{Name: t, Paused: s.paused(driver.SettingType, t)}
		ts.Views, ts.Counts, ts.OldestReadyAge = s.views(func(r driver.CountRow) bool { return r.Queue == name && r.Type == t })
		th := s.history(func(m driver.MinuteRow) bool { return m.Queue == name && m.Type == t })
		ts.Rates = rates(th, s.at, finishedIn)
		var durMS int64
		for _, m := range th {
			ts.DeadLastHour += m.Dead
			ts.FailedLastHour += m.Failed
			ts.AttemptsLastHour += m.Ended
			durMS += m.DurationMS
		}
		if ts.AttemptsLastHour > 0 {
			ts.MeanDuration = time.Duration(durMS/ts.AttemptsLastHour) * time.Millisecond
		}
		if _, ts.Braked = s.braked[t]; !ts.Braked {
			ts.TimeToDrain = drain(ts.Views[ViewReady], busyRate(th, s.at, 5*time.Minute, claimedIn))
		}
		q.Types = append(q.Types, ts)
	}
	slices.SortFunc(q.Types, func(a, b TypeStats) int { return compareStrings(a.Name, b.Name) })
	return q
}

// keelStats are the figures of keel's own work.
func (s *snapshot) keelStats(window time.Duration) KeelStats {
	k := KeelStats{QueueStats: s.queueStats(ReservedQueue, window)}
	since := driver.DueMinute(s.at.Add(-time.Hour))
	for _, m := range s.minutes {
		if m.Minute >= since && IsKeelTask(m.Queue, m.Type) {
			k.HitsLastHour += m.Hits
			k.FailedLastHour += m.Failed
		}
	}
	for _, r := range s.counts {
		if !reservedQueue(r.Queue) || !strings.HasPrefix(r.Type, notifyTypePrefix) {
			continue
		}
		switch r.Kind {
		case driver.KindRetrying:
			k.DeliveriesFailing += r.N
		case string(StateDead):
			k.DeliveriesDead += r.N
		}
	}
	return k
}

func finishedIn(m driver.MinuteRow) int64 { return m.Succeeded + m.Dead }
func claimedIn(m driver.MinuteRow) int64  { return m.Attempts }

func rates(hist []driver.MinuteRow, now time.Time, count func(driver.MinuteRow) int64) Rates {
	return Rates{
		M1:  busyRate(hist, now, time.Minute, count).perSecond,
		M5:  busyRate(hist, now, 5*time.Minute, count).perSecond,
		M15: busyRate(hist, now, 15*time.Minute, count).perSecond,
	}
}

// rate is a count over the busy time of a window.
type rate struct {
	n         float64
	busy      time.Duration
	perSecond float64
}

// busyRate is count per second over the time within the window that the
// history shows work in: a minute with work before and after it counts
// whole; at the edge of a stretch of work only from the minute's first or
// to its last ended attempt (to now in the current minute), and a first
// minute with no ended attempt only with its counts. The counts of a
// minute partly inside the window count in proportion.
func busyRate(hist []driver.MinuteRow, now time.Time, window time.Duration, count func(driver.MinuteRow) int64) rate {
	var r rate
	from := now.Add(-window)
	nowMinute := driver.DueMinute(now)
	active := map[int64]bool{}
	for _, m := range hist {
		active[m.Minute] = m.Attempts > 0 || m.Ended > 0
	}
	for _, m := range hist {
		n := count(m)
		if !active[m.Minute] {
			continue
		}
		start := time.Unix(m.Minute*60, 0)
		end := start.Add(time.Minute)
		lo, hi := start, end
		if !active[m.Minute-1] {
			// A stretch of work starts at its first ended attempt. A
			// minute with claims but none ended (their attempts end in
			// the next minute) adds its claims and no time: counted from
			// the minute's start, a burst begun in its last second was
			// given the idle 59 before it as busy time.
			lo = minTime(end, now)
			if m.FirstMS != 0 {
				lo = time.UnixMilli(m.FirstMS)
			}
		}
		switch {
		case m.Minute >= nowMinute:
			hi = now
		case !active[m.Minute+1] && m.LastMS != 0:
			hi = time.UnixMilli(m.LastMS)
		}
		if hi.Before(lo) {
			hi = lo
		}
		span := hi.Sub(lo)
		clo, chi := maxTime(lo, from), minTime(hi, now)
		if !chi.After(clo) {
			if span == 0 && !lo.Before(from) && !lo.After(now) {
				r.n += float64(n)
			}
			continue
		}
		kept := chi.Sub(clo)
		r.busy += kept
		if span > 0 {
			r.n += float64(n) * float64(kept) / float64(span)
		}
	}
	if r.busy >= time.Second && r.n > 0 {
		r.perSecond = r.n / r.busy.Seconds()
	}
	return r
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// drain is how long ready tasks take to start at r; 0 without a rate.
func drain(ready int64, r rate) time.Duration {
	if ready <= 0 || r.perSecond <= 0 {
		return 0
	}
	return time.Duration(float64(ready) / r.perSecond * float64(time.Second))
}
