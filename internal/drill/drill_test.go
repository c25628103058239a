package drill_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/alerts"
	"github.com/keelq/keel/internal/drill"
	"github.com/keelq/keel/internal/service/servicetest"
)

var (
	_  drill.Store = driver.Driver(nil) // the real drivers fit
	t0             = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// store is a fake driver holding the drill's tasks and the alerts.
type store struct {
	mu     sync.Mutex
	tasks  map[int64]driver.State
	nextID int64
	alerts []driver.AlertRow
	polls  chan struct{} // a send per look for the drill's alert
}

func newStore() *store {
	return &store{tasks: map[int64]driver.State{}, polls: make(chan struct{}, 1000)}
}

func (s *store) add(st driver.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.tasks[s.nextID] = st
}

func (s *store) count(st driver.State) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, x := range s.tasks {
		if x == st {
			n++
		}
	}
	return n
}

func (s *store) List(_ context.Context, f driver.Filter) ([]driver.TaskRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Type != alerts.DrillType || f.Queue != alerts.Queue {
		return nil, errors.New("not the drill's tasks")
	}
	var out []driver.TaskRow
	for id, st := range s.tasks {
		if st == f.State {
			out = append(out, driver.TaskRow{ID: id, State: st})
		}
	}
	return out, nil
}

func (s *store) Cancel(_ context.Context, id int64, _ time.Time) (*driver.TaskRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tasks[id] == driver.StateRunning {
		return nil, driver.ErrWrongState // it finished meanwhile
	}
	s.tasks[id] = driver.StateCancelled
	return &driver.TaskRow{ID: id, State: driver.StateCancelled}, nil
}

func (s *store) PurgeMatching(_ context.Context, f driver.Filter) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for id, st := range s.tasks {
		if st == f.State && n < int64(f.Limit) {
			delete(s.tasks, id)
			n++
		}
	}
	return n, nil
}

func (s *store) ListAlerts(_ context.Context, f driver.AlertFilter) ([]driver.AlertRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !f.Open {
		s.polls <- struct{}{}
	}
	var out []driver.AlertRow
	for i := len(s.alerts) - 1; i >= 0 && len(out) < f.Limit; i-- {
		a := s.alerts[i]
		if a.Rule == f.Rule && a.Subject == f.Subject && (!f.Open || a.Open()) && !a.FiredAt.Before(f.Since) {
			a.Deliveries = slices.Clone(a.Deliveries)
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *store) ResolveAlert(_ context.Context, p driver.ResolveAlertParams) (*driver.AlertRow, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.alerts[p.ID-1]
	if !a.Open() {
		return a, false, nil
	}
	a.ResolvedAt, a.ResolvedMessage = p.Now, p.Message
	return a, true, nil
}

// fire opens the drill's alert at at, with the given notifiers' fired
// deliveries done at at.
func (s *store) fire(at time.Time, delivered ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := driver.AlertRow{ID: int64(len(s.alerts) + 1), Rule: alerts.RuleDeadPerHour, Subject: "type:" + alerts.DrillType, FiredAt: at}
	for _, n := range delivered {
		a.Deliveries = append(a.Deliveries, driver.DeliveryRow{AlertID: a.ID, Event: driver.AlertFired, Notifier: n, Attempts: 1, DeliveredAt: at})
	}
	s.alerts = append(s.alerts, a)
}

// deliver records the fired delivery of the newest alert to notifier at at.
func (s *store) deliver(notifier string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.alerts[len(s.alerts)-1]
	a.Deliveries = append(a.Deliveries, driver.DeliveryRow{AlertID: a.ID, Event: driver.AlertFired, Notifier: notifier, Attempts: 2, DeliveredAt: at})
}

type bundle struct {
	clk   *servicetest.Clock
	drv   *store
	tasks chan alerts.Task
	fail  error // Enqueue's answer
	cfg   drill.Config
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{clk: servicetest.NewClock(t0), drv: newStore(), tasks: make(chan alerts.Task, 100)}
	b.cfg = drill.Config{Driver: b.drv, Clock: b.clk, Enqueue: func(_ context.Context, task alerts.Task) error {
		if b.fail != nil {
			return b.fail
		}
		b.tasks <- task
		b.drv.add(driver.StateDead) // dead-lettered at once, as its handler does
		return nil
	}}
	return b
}

// A drill removes what an earlier drill left (its tasks, its open alert),
// dead-letters its tasks, and passes once its alert reached every
// notifier; then it removes its tasks.
func TestDrillPasses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.drv.add(driver.StatePending)
	b.drv.add(driver.StateRunning)
	b.drv.add(driver.StateDead)
	b.drv.fire(t0.Add(-time.Hour))
	b.cfg.Enqueue = func(ctx context.Context, task alerts.Task) error {
		b.tasks <- task
		b.drv.add(driver.StateDead)
		if len(b.tasks) == 4 {
			b.drv.fire(t0.Add(2*time.Second), "log", "hook")
		}
		return nil
	}
	r, err := drill.New(b.cfg).Run(context.Background(), 4, []string{"log", "hook"})
	if err != nil {
		t.Fatal(err)
	}
	if earlier := b.drv.alerts[0]; earlier.Open() || earlier.ResolvedMessage != "a new drill started; the earlier drill's tasks were removed." {
		t.Fatalf("the earlier drill's alert: %+v", earlier)
	}
	task := servicetest.Recv(t, b.tasks)
	if task.Type != alerts.DrillType || task.MaxAttempts != 1 || task.Key != "" {
		t.Fatalf("task %+v", task)
	}
	want := []drill.Notifier{{Name: "log", Delivered: true, Delay: 2 * time.Second, Attempts: 1}, {Name: "hook", Delivered: true, Delay: 2 * time.Second, Attempts: 1}}
	if !r.Passed || !r.Cleaned || r.Tasks != 4 || r.AlertID != 2 || r.FiredAfter != 2*time.Second || !r.Started.Equal(t0) ||
		!slices.Equal(r.Notifiers, want) {
		t.Fatalf("report %+v", r)
	}
	// The running task of the earlier drill could not be cancelled: it is
	// left to end; everything else is gone.
	if n := len(b.drv.tasks); n != 1 || b.drv.count(driver.StateRunning) != 1 {
		t.Fatalf("%d tasks left: %v", n, b.drv.tasks)
	}
}

// The drill polls until every notifier has the alert.
func TestDrillWaitsForEveryNotifier(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type result struct {
		r   *drill.Report
		err error
	}
	done := make(chan result, 1)
	b.drv.fire(t0, "log")
	go func() {
		r, err := drill.New(b.cfg).Run(context.Background(), 1, []string{"log", "hook"})
		done <- result{r, err}
	}()
	servicetest.Recv(t, b.drv.polls)
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(drill.Poll)
	servicetest.Recv(t, b.drv.polls)
	servicetest.None(t, done)
	b.drv.deliver("hook", t0.Add(drill.Poll))
	b.clk.WaitForWaiters(t, 1)
	b.clk.Advance(drill.Poll)
	res := servicetest.Recv(t, done)
	if res.err != nil || !res.r.Passed || res.r.Notifiers[1].Delay != drill.Poll || res.r.Notifiers[1].Attempts != 2 {
		t.Fatalf("report %+v, %v", res.r, res.err)
	}
}

// A drill whose alert never comes fails when ctx ends, naming every
// notifier, and still removes its tasks.
func TestDrillTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *drill.Report, 1)
	go func() {
		r, err := drill.New(b.cfg).Run(ctx, 2, []string{"log", "hook"})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	servicetest.Recv(t, b.drv.polls)
	b.clk.WaitForWaiters(t, 1)
	cancel()
	r := servicetest.Recv(t, done)
	want := []drill.Notifier{{Name: "log"}, {Name: "hook"}}
	if r.Passed || !r.Cleaned || r.AlertID != 0 || !slices.Equal(r.Notifiers, want) {
		t.Fatalf("report %+v", r)
	}
	if n := len(b.drv.tasks); n != 0 {
		t.Fatalf("%d tasks left", n)
	}
}

// A drill that cannot enqueue says so, and still cleans up.
func TestDrillEnqueueFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fail = errors.New("database down")
	b.cfg.Wrap = func(context.Context, error) error { t.Error("Wrap called for an enqueue error"); return nil }
	r, err := drill.New(b.cfg).Run(context.Background(), 2, []string{"log"})
	if !errors.Is(err, b.fail) || r == nil || !r.Cleaned || r.Passed {
		t.Fatalf("report %+v, %v", r, err)
	}
}
