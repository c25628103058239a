package estimator

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
)

// Status says what an ETA is based on, or why it has no times.
type Status string

// The statuses of an ETA (keel's ETAStatus values).
const (
	Estimated Status = "estimated" // Start and Finish are set
	Paused    Status = "paused"    // the task's queue or type is paused
	Braked    Status = "braked"    // the type's brake is open or half open
	NoWorker  Status = "no_worker" // no live worker process works the queue
	Unknown   Status = "unknown"   // work ahead and no history to time it
)

// MaxAge is how old the history, settings and node registry an estimate
// uses may be: a burst of submits reads them once a second.
const MaxAge = time.Second

// SameMinuteLimit bounds the index read that places a task among the
// tasks of its priority that became ready in the same minute.
const SameMinuteLimit = 100000

// ManyGroups bounds the groups (queue, priority and minute of run_at) of
// one Estimate call that are placed by index reads, two each; the tasks of
// further groups are placed behind the other tasks the counters hold for
// their minute.
const ManyGroups = 32

// Task is a pending task to estimate.
type Task struct {
	ID       int64
	Queue    string
	Type     string
	Priority int
	RunAt    time.Time
}

// ETA is when a pending task is expected to start and finish (keel's
// Estimate, whose fields it mirrors).
type ETA struct {
	Status Status
	// Start and Finish are set when Status is Estimated; Finish is Start
	// plus the type's mean run time.
	Start, Finish time.Time
	// Ahead counts the ready tasks a claim takes before this one.
	Ahead int64
	// PerSecond is the rate at which the queue's tasks start.
	PerSecond float64
	// Brake and NextProbe describe the type's brake when Status is Braked.
	Brake     driver.BrakeState
	NextProbe time.Time
}

// LineStore is what an estimate reads beyond the snapshot: the live
// counters, fresh for every call; the history, again when the snapshot
// had no run time for a queue; and a task's place among the ready tasks of
// its priority and minute (an index read).
type LineStore interface {
	Counts(ctx context.Context) ([]driver.CountRow, error)
	Minutes(ctx context.Context, since time.Time) ([]driver.MinuteRow, error)
	CountAhead(ctx context.Context, params driver.AheadParams) (int64, error)
}

// Config wires an Estimator.
type Config struct {
	// Snapshots gives the settings, nodes, brakes and history, up to
	// MaxAge old.
	Snapshots *Reader
	Store     LineStore
	Now       func() time.Time
	// LiveWindow is how recent a node's registry heartbeat must be for
	// the node to count as live.
	LiveWindow time.Duration
	// Wrap turns a read's error into the error returned; nil keeps it.
	Wrap func(ctx context.Context, err error) error
}

// Estimator is keel's ETA model: it places pending tasks in the line of
// their queue and times the line by the queue's recent rate and its types'
// mean run times.
type Estimator struct {
	cfg Config
}

// New returns an Estimator.
func New(cfg Config) *Estimator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Wrap == nil {
		cfg.Wrap = func(_ context.Context, err error) error { return err }
	}
	return &Estimator{cfg: cfg}
}

// Estimate estimates each of ts, in ts's order, with a number of reads
// that does not grow with the tasks: the live counters once, and two
// index reads for each queue, priority and minute of run_at among the
// ready tasks, which place the first and the last of them in line; the
// tasks between are placed by their order among them. Tasks of more than
// ManyGroups such groups are placed, past the last read group, behind the
// other tasks of their minute the counters hold. A paused, braked or
// unserved task is answered from the snapshot alone.
func (e *Estimator) Estimate(ctx context.Context, ts []Task) ([]ETA, error) {
	out := make([]ETA, len(ts))
	if len(ts) == 0 {
		return out, nil
	}
	cached, err := e.cfg.Snapshots.Read(ctx, MaxAge)
	if err != nil {
		return nil, err
	}
	var todo []int // the tasks whose line is read
	for i := range ts {
		if held, ok := e.held(cached, &ts[i]); ok {
			out[i] = held
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) == 0 {
		return out, nil
	}
	s := *cached
	// The line ahead changes with every submit of a burst: the counters
	// (a small table) are read fresh, the history, settings and nodes may
	// be a second old.
	if s.Counts, err = e.cfg.Store.Counts(ctx); err != nil {
		return nil, fmt.Errorf("keel: read live counters: %w", e.cfg.Wrap(ctx, err))
	}
	now := e.cfg.Now()
	// histAt is when the history was read: the rate measured from it ends
	// there. (Measured to now, a cached snapshot added up to a second of
	// busy time without its claims: just past 5 s of work the rate came
	// out up to a fifth too low, and the ETA as much too late.)
	histAt := s.At
	for _, i := range todo {
		if _, mean := runTimes(&s, &ts[i]); mean == 0 {
			// Nothing had run in the queue as of the cached read: the
			// first run time may have come in since, and it makes the
			// estimate. Only the history is read again, and only for a
			// queue that is served.
			if s.Minutes, err = e.cfg.Store.Minutes(ctx, now.Add(-time.Hour)); err != nil {
				return nil, fmt.Errorf("keel: read task history: %w", e.cfg.Wrap(ctx, err))
			}
			histAt = now
			break
		}
	}
	same, err := e.sameMinute(ctx, &s, ts, todo, now)
	if err != nil {
		return nil, err
	}
	for _, i := range todo {
		out[i] = e.estimate(&s, &ts[i], now, histAt, same[ts[i].ID])
	}
	return out, nil
}

// held answers for a task that waits whatever the line ahead: its queue
// or type is paused, its type is braked or no worker serves its queue; ok
// is false for any other.
func (e *Estimator) held(s *Snapshot, t *Task) (eta ETA, ok bool) {
	switch b, braked := s.Braked[t.Type]; {
	case s.Paused(driver.SettingQueue, t.Queue) || s.Paused(driver.SettingType, t.Type):
		return ETA{Status: Paused}, true
	case braked:
		eta := ETA{Status: Braked, Brake: b.State, NextProbe: b.Until}
		if b.State == driver.BrakeHalfOpen {
			eta.NextProbe = e.cfg.Now()
		}
		return eta, true
	case !s.Served(t.Queue, e.cfg.LiveWindow):
		return ETA{Status: NoWorker}, true
	}
	return ETA{}, false
}

// estimate is the estimate of t, not held, from s (with fresh counters),
// and same, the ready tasks of t's priority and minute of run_at that a
// claim takes before it.
func (e *Estimator) estimate(s *Snapshot, t *Task, now, histAt time.Time, same int64) ETA {
	eta := ETA{Status: Estimated}
	hist, mean := runTimes(s, t)
	if t.RunAt.After(now) {
		// Scheduled: the backlog at that time cannot be known yet.
		eta.Start, eta.Finish = t.RunAt, t.RunAt.Add(mean)
		return eta
	}
	line := ahead(s, t, now, same)
	eta.Ahead = line.n
	queueMean := meanDuration(hist)
	measured := BusyRate(hist, histAt, 5*time.Minute, ClaimedIn)
	slots := float64(s.Slots(t.Queue, e.cfg.LiveWindow))
	switch {
	case measured.Busy >= 5*time.Second && measured.N >= 10:
		eta.PerSecond = measured.PerSecond
		if queueMean > 0 {
			slots = math.Max(slots, math.Round(eta.PerSecond*queueMean.Seconds()))
		}
	case slots > 0 && queueMean > 0:
		eta.PerSecond = slots / queueMean.Seconds()
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
		eta.Start = now
	case eta.PerSecond <= 0:
		if line.n == 0 && line.running == 0 {
			eta.Start = now
			break
		}
		eta.Status = Unknown
		return eta
	default:
		wait := (ahead + 1 - math.Max(free, 0)) / eta.PerSecond
		eta.Start = now.Add(time.Duration(math.Max(wait, 0) * float64(time.Second)))
	}
	eta.Finish = eta.Start.Add(mean)
	return eta
}

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
