package estimator

import (
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
)

// Throughput is how many tasks finished per second over the busy time of
// the last 1, 5 and 15 minutes (see Rates).
type Throughput struct {
	M1, M5, M15 float64
}

// Figures are one queue's or one type's figures in Stats, from the live
// counters and the last hour's history.
type Figures struct {
	Name string
	// Views and Counts count the tasks by view (ViewReady, ...) and by
	// state (CountState); OldestReady is how long the oldest ready task
	// has at least been ready (see Snapshot.Views).
	Views, Counts map[string]int64
	OldestReady   time.Duration
	Rates         Throughput
	// Dead, Failed and Ended count the tasks dead-lettered, the attempts
	// that failed and those that ended in the last hour; Mean is the mean
	// run time of the ended ones (0: none).
	Dead, Failed, Ended int64
	Mean                time.Duration
	// Drain is how long the ready tasks take to start at the claim rate
	// of the last 5 minutes; 0 when none is ready, there is no rate, or
	// (for a type) its brake holds them.
	Drain time.Duration
	// Paused: the queue (or type) is paused. Braked: the type's brake is
	// open or half open (types only).
	Paused, Braked bool
}

// QueueFigures are a queue's figures, its types' summed, with those of
// each type.
type QueueFigures struct {
	Figures
	// Served: a live node (heartbeat within the window) works the queue.
	Served bool
	Types  []Figures // ordered by name
}

// Queue returns the figures of queue name; window is how recent a node's
// heartbeat must be for it to count as live.
func (s *Snapshot) Queue(name string, window time.Duration) QueueFigures {
	q := QueueFigures{Served: s.Served(name, window)}
	q.Figures = s.figures(name, func(r driver.CountRow) bool { return r.Queue == name },
		func(m driver.MinuteRow) bool { return m.Queue == name })
	q.Paused = s.Paused(driver.SettingQueue, name)
	types := map[string]bool{}
	for _, r := range s.Counts {
		if r.Queue == name {
			types[r.Type] = true
		}
	}
	for _, m := range s.Minutes {
		if m.Queue == name {
			types[m.Type] = true
		}
	}
	for t := range types {
		f := s.figures(t, func(r driver.CountRow) bool { return r.Queue == name && r.Type == t },
			func(m driver.MinuteRow) bool { return m.Queue == name && m.Type == t })
		f.Paused = s.Paused(driver.SettingType, t)
		if _, f.Braked = s.Braked[t]; f.Braked {
			f.Drain = 0
		}
		q.Types = append(q.Types, f)
	}
	slices.SortFunc(q.Types, func(a, b Figures) int { return strings.Compare(a.Name, b.Name) })
	return q
}

// figures are the figures of the counter rows and history rows kept.
func (s *Snapshot) figures(name string, counted func(driver.CountRow) bool, ran func(driver.MinuteRow) bool) Figures {
	f := Figures{Name: name}
	f.Views, f.Counts, f.OldestReady = s.Views(counted)
	hist := s.History(ran)
	f.Rates.M1, f.Rates.M5, f.Rates.M15 = Rates(hist, s.At, FinishedIn)
	for _, m := range hist {
		f.Dead += m.Dead
		f.Failed += m.Failed
		f.Ended += m.Ended
	}
	f.Mean = meanDuration(hist)
	f.Drain = Drain(f.Views[ViewReady], BusyRate(hist, s.At, 5*time.Minute, ClaimedIn))
	return f
}
