package estimator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
)

// aheadGroup is the ready tasks of one Estimate call that share a queue,
// a priority and a minute of run_at.
type aheadGroup struct {
	groupKey
	tasks []*Task // in the order a claim takes them, each once
}

type groupKey struct {
	queue    string
	priority int
	minute   int64
}

// sameMinute places the ready tasks of ts[todo] in line among the tasks
// of their queue, priority and minute of run_at: it returns, by task id,
// how many of those a claim takes before each. In each group the first
// and the last task are placed by an index read; a task between is behind
// the first and the group's tasks before it, and behind its share of the
// other tasks the two reads found between the first and the last. Past
// ManyGroups groups, the counters place a group's tasks behind the other
// tasks of their minute.
func (e *Estimator) sameMinute(ctx context.Context, s *Snapshot, ts []Task, todo []int, now time.Time) (map[int64]int64, error) {
	byKey := map[groupKey]*aheadGroup{}
	var groups []*aheadGroup
	seen := map[int64]bool{}
	for _, i := range todo {
		t := &ts[i]
		if t.RunAt.After(now) || seen[t.ID] {
			continue
		}
		seen[t.ID] = true
		k := groupKey{queue: t.Queue, priority: t.Priority, minute: driver.DueMinute(t.RunAt)}
		g := byKey[k]
		if g == nil {
			g = &aheadGroup{groupKey: k}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.tasks = append(g.tasks, t)
	}
	// The largest groups are read; ties in the order of ts.
	slices.SortStableFunc(groups, func(a, b *aheadGroup) int { return len(b.tasks) - len(a.tasks) })
	same := make(map[int64]int64, len(seen))
	count := func(t *Task) (int64, error) {
		n, err := e.cfg.Store.CountAhead(ctx, driver.AheadParams{Queue: t.Queue, Priority: t.Priority, RunAt: t.RunAt,
			ID: t.ID, Now: now, From: time.Unix(driver.DueMinute(t.RunAt)*60, 0), Limit: SameMinuteLimit})
		if err != nil {
			return 0, fmt.Errorf("keel: estimate start: %w", e.cfg.Wrap(ctx, err))
		}
		return n, nil
	}
	for gi, g := range groups {
		slices.SortFunc(g.tasks, func(a, b *Task) int {
			if c := a.RunAt.Compare(b.RunAt); c != 0 {
				return c
			}
			return cmp.Compare(a.ID, b.ID)
		})
		k := int64(len(g.tasks))
		var first, others int64
		if gi < ManyGroups {
			var err error
			if first, err = count(g.tasks[0]); err != nil {
				return nil, err
			}
			if k > 1 {
				last, err := count(g.tasks[k-1])
				if err != nil {
					return nil, err
				}
				others = max(last-first-(k-1), 0)
			}
		} else {
			first = max(readyIn(s, g.queue, g.priority, g.minute, now)-k, 0)
		}
		for j, t := range g.tasks {
			n := first + int64(j)
			if k > 1 {
				n += others * int64(j) / (k - 1)
			}
			same[t.ID] = n
		}
	}
	return same, nil
}

// pendingKind reports whether a live counter's kind counts pending tasks
// (ready, scheduled or retrying).
func pendingKind(kind string) bool {
	return kind == string(driver.StatePending) || kind == driver.KindRetrying
}

// readyIn counts the ready tasks the counters hold for queue, priority
// and minute of run_at.
func readyIn(s *Snapshot, queue string, priority int, minute int64, now time.Time) int64 {
	var n int64
	for _, r := range s.Counts {
		if r.Queue == queue && r.Priority == priority && r.Due == minute && r.Due <= driver.DueMinute(now) && pendingKind(r.Kind) {
			n += r.N
		}
	}
	return n
}

// line is what stands between a pending task and its start: the ready
// tasks a claim takes before it and their work (each at its type's mean
// run time), and the queue's running tasks.
type line struct {
	n, running int64
	work       float64 // seconds
}

// ahead is the line before t: the ready tasks a claim takes before it
// (from the counters for higher priorities and earlier minutes of its own,
// and same, those of its own priority and minute) and the queue's running
// tasks. Each counts at its type's mean run time in the queue's history,
// else the queue's; the tasks of t's own minute, whose types the index
// read does not give, at the mean of that minute's types in the counters.
func ahead(s *Snapshot, t *Task, now time.Time, same int64) line {
	var l line
	means := typeMeans(s, t.Queue)
	runTime := func(typ string) float64 {
		m, ok := means[typ]
		if !ok {
			m = means[""]
		}
		return m.Seconds()
	}
	nowMinute, own := driver.DueMinute(now), driver.DueMinute(t.RunAt)
	var ownN int64
	var ownWork float64
	for _, r := range s.Counts {
		if r.Queue != t.Queue {
			continue
		}
		switch {
		case r.Kind == string(driver.StateRunning):
			l.running += r.N
		case !pendingKind(r.Kind), r.Due > nowMinute:
		case r.Priority > t.Priority, r.Priority == t.Priority && r.Due < own:
			l.n += r.N
			l.work += float64(r.N) * runTime(r.Type)
		case r.Priority == t.Priority && r.Due == own:
			ownN += r.N
			ownWork += float64(r.N) * runTime(r.Type)
		}
	}
	if same > 0 {
		each := runTime(t.Type)
		if ownN > 0 {
			each = ownWork / float64(ownN)
		}
		l.n += same
		l.work += float64(same) * each
	}
	return l
}

// typeMeans returns the mean run time of each type in queue's history that
// has ended attempts, and under "" the queue's own.
func typeMeans(s *Snapshot, queue string) map[string]time.Duration {
	type sum struct{ n, ms int64 }
	sums := map[string]sum{}
	for _, m := range s.Minutes {
		if m.Queue != queue {
			continue
		}
		for _, k := range []string{m.Type, ""} {
			x := sums[k]
			x.n, x.ms = x.n+m.Ended, x.ms+m.DurationMS
			sums[k] = x
		}
	}
	out := make(map[string]time.Duration, len(sums))
	for k, x := range sums {
		if x.n > 0 {
			out[k] = time.Duration(x.ms/x.n) * time.Millisecond
		}
	}
	return out
}

// runTimes returns the history of t's queue and the mean run time of t's
// type in it, else of the whole queue (0 when nothing ran).
func runTimes(s *Snapshot, t *Task) (hist []driver.MinuteRow, mean time.Duration) {
	hist = s.History(func(m driver.MinuteRow) bool { return m.Queue == t.Queue })
	if mean = meanDuration(s.History(func(m driver.MinuteRow) bool { return m.Queue == t.Queue && m.Type == t.Type })); mean == 0 {
		mean = meanDuration(hist)
	}
	return hist, mean
}

// typeRan reports whether an attempt of t's type ended in t's queue in
// the snapshot's history.
func typeRan(s *Snapshot, t *Task) bool {
	for _, m := range s.History(func(m driver.MinuteRow) bool { return m.Queue == t.Queue && m.Type == t.Type }) {
		if m.Ended > 0 {
			return true
		}
	}
	return false
}

// meanDuration is the mean run time of the attempts that ended in hist; 0
// when none did.
func meanDuration(hist []driver.MinuteRow) time.Duration {
	var n, ms int64
	for _, m := range hist {
		n += m.Ended
		ms += m.DurationMS
	}
	if n == 0 {
		return 0
	}
	return time.Duration(ms/n) * time.Millisecond
}
