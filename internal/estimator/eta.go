package estimator

import (
	"context"
	"fmt"
	"math"
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
	Waiting   Status = "waiting"   // held for its turn in its sequence
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
		if !typeRan(&s, &ts[i]) {
			// Nothing of the task's type had run in its queue as of the
			// cached read: its first run time may have come in since, and
			// it makes the estimate (without it the type is estimated at
			// the queue's mean, which a fast type's runs set: a slow
			// task was told 12 ms where its line took 500). Only the
			// history is read again, and only for a queue that is served.
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

// held answers for a task that waits whatever the line ahead: it is held
// for its turn, its queue or type is paused, its type is braked or no
// worker serves its queue; ok
// is false for any other.
func (e *Estimator) held(s *Snapshot, t *Task) (eta ETA, ok bool) {
	switch b, braked := s.Braked[t.Type]; {
	case driver.Held(t.RunAt):
		return ETA{Status: Waiting}, true
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
