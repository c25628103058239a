package keel

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
)

// ETAStatus says what an Estimate is based on, or why it has no times.
type ETAStatus string

// The estimate statuses.
const (
	// ETAEstimated: Start and Finish are set.
	ETAEstimated ETAStatus = "estimated"
	// ETAPaused: the task's queue or type is paused; it starts when resumed.
	ETAPaused ETAStatus = "paused"
	// ETABraked: the automatic brake of the task's type is open or half
	// open; it starts after a probe task succeeds (see Client.Brakes).
	ETABraked ETAStatus = "braked"
	// ETANoWorker: no live worker process works the task's queue.
	ETANoWorker ETAStatus = "no_worker"
	// ETAUnknown: the queue has work ahead but no history yet to say how
	// fast it goes (and this client runs none of its workers).
	ETAUnknown ETAStatus = "unknown"
)

// Estimate is when a pending task is expected to start and finish (seed
// 003 §3.1).
type Estimate struct {
	Status ETAStatus
	Start  time.Time // zero unless Status is ETAEstimated
	Finish time.Time // Start plus the type's mean run time; zero unless estimated
	// Ahead counts the ready tasks a claim takes before this one.
	Ahead int64
	// PerSecond is the rate at which the queue's tasks start: measured over
	// the last five minutes of work when there was enough, else the live
	// nodes' workers for the queue (from the node registry, capped by the
	// queue's concurrency setting) divided by the queue's mean run time.
	// The line ahead is counted in tasks of the queue's mean run time.
	PerSecond float64
	// Brake is the state of the type's brake when Status is ETABraked:
	// BrakeOpen (no task of the type runs before NextProbe) or
	// BrakeHalfOpen (probe tasks run now). Empty otherwise.
	Brake BrakeState
	// NextProbe is when the braked type's next probe tasks are due: an
	// open brake's Until, the end of its cooldown (in the past when the
	// leader has yet to let the probes through), and for a half-open brake,
	// whose probes run now, the time of the estimate. Zero unless Status is
	// ETABraked.
	NextProbe time.Time
}

// BrakeState is the state of a type's automatic brake: BrakeClosed,
// BrakeOpen or BrakeHalfOpen.
type BrakeState = driver.BrakeState

// etaMaxAge is how old the history, settings and node registry an
// estimate uses may be: a burst of submits reads them once a second.
const etaMaxAge = time.Second

// etaSameMinuteLimit bounds the index read that places a task among the
// tasks of its priority that became ready in the same minute.
const etaSameMinuteLimit = 100000

// etaManyGroups bounds the groups (queue, priority and minute of run_at)
// of one EstimateMany call that are placed by index reads, two each; the
// tasks of further groups are placed behind the other tasks the counters
// hold for their minute.
const etaManyGroups = 32

// ETA is Estimate's start: ok is false when there is no estimate (the task
// is not pending, paused, not served, or there is no history yet).
func (c *Client) ETA(ctx context.Context, t *TaskInfo) (eta time.Time, ok bool, err error) {
	e, err := c.Estimate(ctx, t)
	if err != nil || e == nil || e.Status != ETAEstimated {
		return time.Time{}, false, err
	}
	return e.Start, true, nil
}

// Estimate estimates when the pending task t starts and finishes, from the
// live counters and the last hour's history: the line ahead of it (the
// ready tasks of higher priority, and of its own priority earlier in line),
// each task counted at its type's mean run time, and the rate at which the
// queue's tasks start. It returns nil for a task that is not pending.
func (c *Client) Estimate(ctx context.Context, t *TaskInfo) (*Estimate, error) {
	if t == nil || t.State != StatePending {
		return nil, nil
	}
	es, err := c.EstimateMany(ctx, []*TaskInfo{t})
	if err != nil {
		return nil, err
	}
	return es[0], nil
}

// EstimateMany is Estimate for each of ts (nil for a task that is not
// pending), in ts's order, with a number of reads that does not grow with
// the tasks: the live counters once, and two index reads for each queue,
// priority and minute of run_at among the ready tasks, which place the
// first and the last of them in line; the tasks between are placed by
// their order among them (a batch of one priority submitted at once: two
// reads). Tasks of more than 32 such groups are placed, past the 32nd,
// behind the other tasks of their minute the counters hold.
func (c *Client) EstimateMany(ctx context.Context, ts []*TaskInfo) ([]*Estimate, error) {
	out := make([]*Estimate, len(ts))
	var todo []int // the tasks whose line is read
	for i, t := range ts {
		if t != nil && t.State == StatePending {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return out, nil
	}
	cached, err := c.snaps.Read(ctx, etaMaxAge)
	if err != nil {
		return nil, err
	}
	// Paused, braked and unserved are answered from the snapshot alone:
	// they do not depend on the line ahead.
	todo = slices.DeleteFunc(todo, func(i int) bool {
		out[i] = c.held(cached, ts[i])
		return out[i] != nil
	})
	if len(todo) == 0 {
		return out, nil
	}
	s := *cached
	// The line ahead changes with every submit of a burst: the counters
	// (a small table) are read fresh, the history, settings and nodes may
	// be a second old.
	if s.Counts, err = c.drv.Counts(ctx); err != nil {
		return nil, fmt.Errorf("keel: read live counters: %w", unavailable(ctx, err))
	}
	now := c.cfg.Now()
	// histAt is when the history was read: the rate measured from it ends
	// there. (Measured to now, a cached snapshot added up to a second of
	// busy time without its claims: just past 5 s of work the rate came
	// out up to a fifth too low, and the ETA as much too late.)
	histAt := s.At
	for _, i := range todo {
		if _, mean := runTimes(&s, ts[i]); mean == 0 {
			// Nothing had run in the queue as of the cached read: the
			// first run time may have come in since, and it makes the
			// estimate. Only the history is read again, and only for a
			// queue that is served.
			if s.Minutes, err = c.drv.Minutes(ctx, now.Add(-time.Hour)); err != nil {
				return nil, fmt.Errorf("keel: read task history: %w", unavailable(ctx, err))
			}
			histAt = now
			break
		}
	}
	same, err := c.sameMinute(ctx, &s, ts, todo, now)
	if err != nil {
		return nil, err
	}
	for _, i := range todo {
		out[i] = c.estimate(&s, ts[i], now, histAt, same[ts[i].ID])
	}
	return out, nil
}

// held answers for a task that waits whatever the line ahead: its queue
// or type is paused, its type is braked or no worker serves its queue;
// nil for any other.
func (c *Client) held(s *estimator.Snapshot, t *TaskInfo) *Estimate {
	switch b, braked := s.Braked[t.Type]; {
	case s.Paused(driver.SettingQueue, t.Queue) || s.Paused(driver.SettingType, t.Type):
		return &Estimate{Status: ETAPaused}
	case braked:
		e := &Estimate{Status: ETABraked, Brake: b.State, NextProbe: b.Until}
		if b.State == driver.BrakeHalfOpen {
			e.NextProbe = c.cfg.Now()
		}
		return e
	case !s.Served(t.Queue, c.liveWindow()):
		return &Estimate{Status: ETANoWorker}
	}
	return nil
}

// estimate is the estimate of t, not held, from s (with fresh counters),
// and same, the ready tasks of t's priority and minute of run_at that a
// claim takes before it.
func (c *Client) estimate(s *estimator.Snapshot, t *TaskInfo, now, histAt time.Time, same int64) *Estimate {
	e := &Estimate{Status: ETAEstimated}
	hist, mean := runTimes(s, t)
	if t.RunAt.After(now) {
		// Scheduled: the backlog at that time cannot be known yet.
		e.Start, e.Finish = t.RunAt, t.RunAt.Add(mean)
		return e
	}
	line := ahead(s, t, now, same)
	e.Ahead = line.n
	queueMean := meanDuration(hist)
	measured := estimator.BusyRate(hist, histAt, 5*time.Minute, estimator.ClaimedIn)
	slots := float64(s.Slots(t.Queue, c.liveWindow()))
	switch {
	case measured.Busy >= 5*time.Second && measured.N >= 10:
		e.PerSecond = measured.PerSecond
		if queueMean > 0 {
			slots = math.Max(slots, math.Round(e.PerSecond*queueMean.Seconds()))
		}
	case slots > 0 && queueMean > 0:
		e.PerSecond = slots / queueMean.Seconds()
	}
	// The line ahead in tasks of the queue's mean run time: a task of a
	// type that runs in a tenth of it counts a tenth. (Counted whole, 20
	// notifications of 1 ms behind reports of 0.2 s were told 2 s.)
	ahead := float64(line.n)
	if queueMean > 0 {
		ahead = line.work / queueMean.Seconds()
	}
	free := slots - float64(line.running)
	switch {
	case slots > 0 && float64(line.n) < free:
		e.Start = now
	case e.PerSecond <= 0:
		if line.n == 0 && line.running == 0 {
			e.Start = now
			break
		}
		e.Status = ETAUnknown
		return e
	default:
		wait := (ahead + 1 - math.Max(free, 0)) / e.PerSecond
		e.Start = now.Add(time.Duration(math.Max(wait, 0) * float64(time.Second)))
	}
	e.Finish = e.Start.Add(mean)
	return e
}

// aheadGroup is the ready tasks of one EstimateMany call that share a
// queue, a priority and a minute of run_at.
type aheadGroup struct {
	groupKey
	tasks []*TaskInfo // in the order a claim takes them, each once
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
// etaManyGroups groups, the counters place a group's tasks behind the
// other tasks of their minute.
func (c *Client) sameMinute(ctx context.Context, s *estimator.Snapshot, ts []*TaskInfo, todo []int, now time.Time) (map[int64]int64, error) {
	byKey := map[groupKey]*aheadGroup{}
	var groups []*aheadGroup
	seen := map[int64]bool{}
	for _, i := range todo {
		t := ts[i]
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
	count := func(t *TaskInfo) (int64, error) {
		n, err := c.drv.CountAhead(ctx, driver.AheadParams{Queue: t.Queue, Priority: t.Priority, RunAt: t.RunAt,
			ID: t.ID, Now: now, From: time.Unix(driver.DueMinute(t.RunAt)*60, 0), Limit: etaSameMinuteLimit})
		if err != nil {
			return 0, fmt.Errorf("keel: estimate start: %w", unavailable(ctx, err))
		}
		return n, nil
	}
	for gi, g := range groups {
		slices.SortFunc(g.tasks, func(a, b *TaskInfo) int {
			if c := a.RunAt.Compare(b.RunAt); c != 0 {
				return c
			}
			return cmp.Compare(a.ID, b.ID)
		})
		k := int64(len(g.tasks))
		var first, others int64
		if gi < etaManyGroups {
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

// readyIn counts the ready tasks the counters hold for queue, priority
// and minute of run_at.
func readyIn(s *estimator.Snapshot, queue string, priority int, minute int64, now time.Time) int64 {
	var n int64
	for _, r := range s.Counts {
		if r.Queue == queue && r.Priority == priority && r.Due == minute && r.Due <= driver.DueMinute(now) &&
			(r.Kind == string(StatePending) || r.Kind == driver.KindRetrying) {
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
func ahead(s *estimator.Snapshot, t *TaskInfo, now time.Time, same int64) line {
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
		case r.Kind == string(StateRunning):
			l.running += r.N
		case r.Kind != string(StatePending) && r.Kind != driver.KindRetrying, r.Due > nowMinute:
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
func typeMeans(s *estimator.Snapshot, queue string) map[string]time.Duration {
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
func runTimes(s *estimator.Snapshot, t *TaskInfo) (hist []driver.MinuteRow, mean time.Duration) {
	hist = s.History(func(m driver.MinuteRow) bool { return m.Queue == t.Queue })
	if mean = meanDuration(s.History(func(m driver.MinuteRow) bool { return m.Queue == t.Queue && m.Type == t.Type })); mean == 0 {
		mean = meanDuration(hist)
	}
	return hist, mean
}

// meanDuration is the mean run time of the attempts that ended in hist.
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
