// Package estimator reads and keeps the snapshot that keel's figures are
// computed from: the live counters, the last hour's history, the settings,
// the node registry and the open brakes, read together as of one instant.
// Stats, the ETA model and the alert rules all judge from a Snapshot, so
// none of them reads the task table. It also holds what is computed from
// it: the rate arithmetic, the per-queue and per-type figures of Stats
// (Snapshot.Queue) and the ETA model (Estimator). Beside the snapshot it
// computes the other figures keel reports: the latency percentiles of a
// sample of finished tasks (LatencyOf) and the history in steps with its
// backlog peaks (History).
package estimator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
)

// Store is what a snapshot is read from.
type Store interface {
	Counts(ctx context.Context) ([]driver.CountRow, error)
	Minutes(ctx context.Context, since time.Time) ([]driver.MinuteRow, error)
	ListSettings(ctx context.Context) ([]driver.Setting, error)
	ListNodes(ctx context.Context) ([]driver.NodeRow, error)
}

// Snapshot is what Stats, ETA and the alert rules read, as of At.
type Snapshot struct {
	At       time.Time
	Counts   []driver.CountRow
	Minutes  []driver.MinuteRow
	Settings []driver.Setting
	Nodes    []driver.NodeRow
	// Workers are the reading client's own workers per queue (it may work
	// a queue before its registry row is written).
	Workers map[string]int
	// Braked are the brakes that are open or half open, by type.
	Braked map[string]driver.BrakeRow
	// Blocked are the sequence keys held by a dead member, the first
	// MaxBlocked of them by key.
	Blocked []driver.BlockedSequence
}

// MaxBlocked bounds the blocked sequences a snapshot reads.
const MaxBlocked = 1000

// Reader reads snapshots and keeps the last one, so that a burst of ETA
// requests costs a few small reads every second, not a few per request.
type Reader struct {
	Store Store
	Now   func() time.Time
	// Workers returns the reading client's workers per queue.
	Workers func() map[string]int
	// Wrap turns a read's error into the error returned (the client marks
	// an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error

	mu   sync.Mutex
	last *Snapshot
}

// Read returns a snapshot: the kept one when it is younger than maxAge,
// otherwise a new one (kept when maxAge > 0). maxAge 0 always reads.
func (r *Reader) Read(ctx context.Context, maxAge time.Duration) (*Snapshot, error) {
	now := r.Now()
	if maxAge > 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		if s := r.last; s != nil && !now.Before(s.At) && now.Sub(s.At) < maxAge {
			return s, nil
		}
	}
	wrap := func(what string, err error) error {
		if r.Wrap != nil {
			err = r.Wrap(ctx, err)
		}
		return fmt.Errorf("keel: %s: %w", what, err)
	}
	s := &Snapshot{At: now, Workers: map[string]int{}}
	var err error
	if s.Counts, err = r.Store.Counts(ctx); err != nil {
		return nil, wrap("read live counters", err)
	}
	if s.Minutes, err = r.Store.Minutes(ctx, now.Add(-time.Hour)); err != nil {
		return nil, wrap("read task history", err)
	}
	if s.Settings, err = r.Store.ListSettings(ctx); err != nil {
		return nil, wrap("list settings", err)
	}
	if s.Nodes, err = r.Store.ListNodes(ctx); err != nil {
		return nil, wrap("list nodes", err)
	}
	if b, ok := r.Store.(driver.Braker); ok {
		brakes, err := b.ListBrakes(ctx)
		if err != nil {
			return nil, wrap("list brakes", err)
		}
		for _, row := range brakes {
			if row.State == driver.BrakeOpen || row.State == driver.BrakeHalfOpen {
				if s.Braked == nil {
					s.Braked = map[string]driver.BrakeRow{}
				}
				s.Braked[row.Type] = row
			}
		}
	}
	if q, ok := r.Store.(driver.Sequencer); ok {
		if s.Blocked, err = q.BlockedSequences(ctx, "", MaxBlocked); err != nil {
			return nil, wrap("list blocked sequences", err)
		}
	}
	if r.Workers != nil {
		s.Workers = r.Workers()
	}
	if maxAge > 0 {
		r.last = s
	}
	return s, nil
}

// QueueNames are the queues with counters or history, sorted.
func (s *Snapshot) QueueNames() []string {
	seen := map[string]bool{}
	for _, r := range s.Counts {
		seen[r.Queue] = true
	}
	for _, m := range s.Minutes {
		seen[m.Queue] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.SortFunc(names, strings.Compare)
	return names
}

// Paused reports whether the queue or type (kind) name is paused.
func (s *Snapshot) Paused(kind driver.SettingKind, name string) bool {
	for _, st := range s.Settings {
		if st.Kind == kind && st.Name == name {
			return st.Paused
		}
	}
	return false
}

// Served reports whether a live node (one whose registry heartbeat is
// within window) works queue.
func (s *Snapshot) Served(queue string, window time.Duration) bool {
	if s.Workers[queue] > 0 {
		return true
	}
	for _, n := range s.Nodes {
		if s.At.Sub(n.HeartbeatAt) <= window && slices.Contains(n.Queues, queue) {
			return true
		}
	}
	return false
}

// Slots is how many of queue's tasks the live nodes run at once: the
// nodes' workers for it, capped by the queue's concurrency setting (which
// holds across the cluster). A client that works the queue but is not
// registered yet counts its own.
func (s *Snapshot) Slots(queue string, window time.Duration) int {
	limit := 0
	for _, st := range s.Settings {
		if st.Kind == driver.SettingQueue && st.Name == queue {
			limit = st.Concurrency
		}
	}
	n := 0
	for _, node := range s.Nodes {
		if s.At.Sub(node.HeartbeatAt) > window {
			continue
		}
		n += node.Workers[queue]
	}
	if n == 0 {
		n = s.Workers[queue]
	}
	if limit > 0 {
		n = min(n, limit)
	}
	return n
}

// The views Views counts: the states, with pending split by when the task
// can run.
const (
	ViewReady     = "ready"     // pending, run_at reached
	ViewScheduled = "scheduled" // pending, never attempted, run_at ahead
	ViewRetrying  = "retrying"  // pending after a failed attempt, run_at ahead
	ViewRunning   = "running"
	ViewDead      = "dead"
)

// CountState is the task state a live counter's kind counts: retrying
// tasks are pending.
func CountState(kind string) string {
	if kind == driver.KindRetrying {
		return string(driver.StatePending)
	}
	return kind
}

// Views counts the counter rows that match keep by view and by state
// (CountState), and says how long the oldest ready one has at least been
// ready.
func (s *Snapshot) Views(keep func(r driver.CountRow) bool) (views, counts map[string]int64, oldest time.Duration) {
	views, counts = map[string]int64{}, map[string]int64{}
	nowMinute := driver.DueMinute(s.At)
	oldestDue := int64(0)
	for _, r := range s.Counts {
		if !keep(r) {
			continue
		}
		counts[CountState(r.Kind)] += r.N
		switch {
		case r.Kind == string(driver.StateRunning):
			views[ViewRunning] += r.N
		case r.Kind == string(driver.StateDead):
			views[ViewDead] += r.N
		case r.Kind != string(driver.StatePending) && r.Kind != driver.KindRetrying:
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
		oldest = max(0, s.At.Sub(time.Unix((oldestDue+1)*60, 0)))
	}
	return views, counts, oldest
}

// History sums the history rows that match keep by minute.
func (s *Snapshot) History(keep func(m driver.MinuteRow) bool) []driver.MinuteRow {
	var out []driver.MinuteRow
	for _, m := range s.Minutes {
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
