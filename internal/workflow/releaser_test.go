package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/kerr"
)

// fakeStore keeps tasks, their dependencies and wait rows as a driver
// does, and settles a wait on the state it holds at the time, as the
// driver does under its lock.
type fakeStore struct {
	state   map[int64]driver.State
	held    map[int64]bool
	deps    map[int64][]int64
	waits   map[int64]string // task id → on_failure
	reasons map[int64]string
	settled []time.Time
	// stale, when set, is what Waits reports of every task's state in
	// place of the truth (a read that lags the settle's).
	stale map[int64]driver.State
	err   error
}

func newStore() *fakeStore {
	return &fakeStore{state: map[int64]driver.State{}, held: map[int64]bool{}, deps: map[int64][]int64{},
		waits: map[int64]string{}, reasons: map[int64]string{}}
}

// add adds task id in state s, held on deps when it has some.
func (s *fakeStore) add(id int64, st driver.State, onFailure string, deps ...int64) {
	s.state[id] = st
	if len(deps) > 0 {
		s.held[id], s.deps[id], s.waits[id] = true, deps, onFailure
	}
}

func (s *fakeStore) wait(id int64, states map[int64]driver.State) driver.Wait {
	w := driver.Wait{TaskID: id, OnFailure: s.waits[id], State: states[id], Held: s.held[id] && states[id] == driver.StatePending}
	for _, d := range s.deps[id] {
		w.Deps = append(w.Deps, driver.Dep{ID: d, Name: fmt.Sprintf("t%d", d), State: states[d]})
	}
	return w
}

func (s *fakeStore) Waits(_ context.Context, after int64, limit int) ([]driver.Wait, error) {
	if s.err != nil {
		return nil, s.err
	}
	states := s.state
	if s.stale != nil {
		states = s.stale
	}
	var ids []int64
	for id := range s.waits {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []driver.Wait
	for _, id := range ids[:min(limit, len(ids))] {
		out = append(out, s.wait(id, states))
	}
	return out, nil
}

func (s *fakeStore) Settle(_ context.Context, p driver.SettleParams) (driver.Verdict, error) {
	s.settled = append(s.settled, p.Now)
	if _, ok := s.waits[p.TaskID]; !ok {
		return driver.Verdict{}, nil
	}
	v := p.Decide(s.wait(p.TaskID, s.state))
	switch v.Kind {
	case driver.Keep:
		return v, nil
	case driver.Release:
		s.held[p.TaskID] = false
	case driver.CancelHeld:
		s.held[p.TaskID], s.state[p.TaskID], s.reasons[p.TaskID] = false, driver.StateCancelled, v.Reason
	}
	delete(s.waits, p.TaskID)
	return v, nil
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func releaser(s *fakeStore) *Releaser {
	return New(Config{Store: s, Now: func() time.Time { return t0 }})
}

// TestReleaseWhenAllSucceeded: a task is released once every dependency
// succeeded, once; another pass changes nothing.
func TestReleaseWhenAllSucceeded(t *testing.T) {
	s := newStore()
	s.add(1, driver.StateSucceeded, "")
	s.add(2, driver.StateRunning, "")
	s.add(3, driver.StatePending, driver.OnFailureCancel, 1, 2)
	r := releaser(s)
	if c, err := r.RunOnce(t.Context()); err != nil || c != (Counts{}) || !s.held[3] {
		t.Fatalf("released with a dependency running: %+v, %v", c, err)
	}
	s.state[2] = driver.StateSucceeded
	if c, err := r.RunOnce(t.Context()); err != nil || c != (Counts{Released: 1}) || s.held[3] {
		t.Fatalf("not released: %+v, %v", c, err)
	}
	if len(s.settled) != 1 || !s.settled[0].Equal(t0) {
		t.Fatalf("settled at %v, want once at the clock's %v", s.settled, t0)
	}
	if c, err := r.RunOnce(t.Context()); err != nil || c != (Counts{}) {
		t.Fatalf("second pass: %+v, %v", c, err)
	}
}

// TestCancelCascades: a dead dependency cancels its dependent with the
// reason, and that one's dependent in the same pass.
func TestCancelCascades(t *testing.T) {
	s := newStore()
	s.add(1, driver.StateDead, "")
	s.add(2, driver.StateSucceeded, "")
	s.add(3, driver.StatePending, driver.OnFailureCancel, 2, 1)
	s.add(4, driver.StatePending, driver.OnFailureCancel, 3)
	c, err := releaser(s).RunOnce(t.Context())
	if err != nil || c != (Counts{Cancelled: 2}) {
		t.Fatalf("pass: %+v, %v", c, err)
	}
	if s.reasons[3] != "dependency 1 (t1) is dead" || s.reasons[4] != "dependency 3 (t3) is cancelled" {
		t.Fatalf("reasons %v", s.reasons)
	}
}

// TestContinue: under on_failure continue a dependent waits for every
// dependency to be final, then runs.
func TestContinue(t *testing.T) {
	s := newStore()
	s.add(1, driver.StateDead, "")
	s.add(2, driver.StateRunning, "")
	s.add(3, driver.StatePending, driver.OnFailureContinue, 1, 2)
	r := releaser(s)
	if c, _ := r.RunOnce(t.Context()); c != (Counts{}) {
		t.Fatalf("decided early: %+v", c)
	}
	s.state[2] = driver.StateCancelled
	if c, _ := r.RunOnce(t.Context()); c != (Counts{Released: 1}) || s.state[3] != driver.StatePending {
		t.Fatalf("not released: %+v", c)
	}
}

// TestDropAndGone: the wait of a task a user cancelled is dropped; a
// dependency no longer stored cancels.
func TestDropAndGone(t *testing.T) {
	s := newStore()
	s.add(1, driver.StatePending, "")
	s.add(2, driver.StatePending, driver.OnFailureCancel, 1)
	s.state[2] = driver.StateCancelled // the user's cancel
	s.add(3, driver.StatePending, driver.OnFailureCancel, 9)
	c, err := releaser(s).RunOnce(t.Context())
	if err != nil || c != (Counts{Cancelled: 1, Dropped: 1}) || len(s.waits) != 0 {
		t.Fatalf("pass: %+v, %v, waits left %v", c, err, s.waits)
	}
	if s.reasons[3] != "dependency 9 (t9) is no longer stored" {
		t.Fatalf("reason %q", s.reasons[3])
	}
}

// TestDecisionTakenAgain: a stale read that shows every dependency
// succeeded releases nothing while the settle's read shows one running.
func TestDecisionTakenAgain(t *testing.T) {
	s := newStore()
	s.add(1, driver.StateRunning, "")
	s.add(2, driver.StatePending, driver.OnFailureCancel, 1)
	s.stale = map[int64]driver.State{1: driver.StateSucceeded, 2: driver.StatePending}
	if c, err := releaser(s).RunOnce(t.Context()); err != nil || c != (Counts{}) || !s.held[2] {
		t.Fatalf("released on a stale read: %+v, %v", c, err)
	}
	if len(s.settled) != 1 {
		t.Fatalf("settled %d times", len(s.settled))
	}
}

// TestLeaderOnlyAndErrors: a follower runs no pass; a store's error is
// returned by RunOnce and logged by Run.
func TestLeaderOnlyAndErrors(t *testing.T) {
	s := newStore()
	s.add(1, driver.StateSucceeded, "")
	s.add(2, driver.StatePending, driver.OnFailureCancel, 1)
	leading := false
	r := New(Config{Store: s, Now: func() time.Time { return t0 }, Leading: func() bool { return leading }})
	r.Run(t.Context())
	if !s.held[2] {
		t.Fatal("a follower released a task")
	}
	s.err = errors.New("database gone")
	if _, err := r.RunOnce(t.Context()); !errors.Is(err, s.err) {
		t.Fatalf("RunOnce: %v", err)
	}
	leading = true
	r.Run(t.Context()) // logs, does not panic
	s.err = nil
	r.Run(t.Context())
	if s.held[2] {
		t.Fatal("the leader did not release")
	}
}

// TestPaging: more waits than a page are all read.
func TestPaging(t *testing.T) {
	s := newStore()
	s.add(1, driver.StateSucceeded, "")
	for id := int64(2); id < 2+Page+10; id++ {
		s.add(id, driver.StatePending, driver.OnFailureCancel, 1)
	}
	if c, err := releaser(s).RunOnce(t.Context()); err != nil || c.Released != Page+10 {
		t.Fatalf("pass: %+v, %v", c, err)
	}
}

func task(name string, needs ...string) Task {
	return Task{Name: name, Needs: needs, Spec: enqueue.Spec{Type: "t"}}
}

// TestOrder: tasks come after those they need, otherwise in the given
// order; bad graphs are ErrInvalid naming the problem.
func TestOrder(t *testing.T) {
	order, needs, err := Order(Spec{Name: "w", Tasks: []Task{task("D", "B", "C"), task("B", "A"), task("C", "A", "A"), task("A")}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(order) != "[3 1 2 0]" || fmt.Sprint(needs) != "[[] [0] [0] [1 2]]" {
		t.Fatalf("order %v needs %v", order, needs)
	}
	for name, c := range map[string]struct {
		s    Spec
		want string
	}{
		"cycle":     {Spec{Name: "w", Tasks: []Task{task("A"), task("B", "C"), task("C", "B")}}, "tasks B, C form a cycle"},
		"unknown":   {Spec{Name: "w", Tasks: []Task{task("A", "Z")}}, `needs "Z"`},
		"duplicate": {Spec{Name: "w", Tasks: []Task{task("A"), task("A")}}, `duplicate name "A"`},
		"self":      {Spec{Name: "w", Tasks: []Task{task("A", "A")}}, `"A" needs itself`},
		"bad name":  {Spec{Name: "w", Tasks: []Task{task("a b")}}, "invalid name"},
		"no name":   {Spec{Tasks: []Task{task("A")}}, "workflow name"},
		"policy":    {Spec{Name: "w", OnFailure: "skip", Tasks: []Task{task("A")}}, "on_failure"},
		"empty":     {Spec{Name: "w"}, "at least one task"},
	} {
		_, _, err := Order(c.s)
		if !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", name, err, c.want)
		}
	}
}

// TestOverall: running while a task is pending or running, failed when
// one did not succeed, else succeeded.
func TestOverall(t *testing.T) {
	n := func(states ...driver.State) []driver.WorkflowNode {
		var out []driver.WorkflowNode
		for _, s := range states {
			out = append(out, driver.WorkflowNode{Task: &driver.TaskRow{State: s}})
		}
		return append(out, driver.WorkflowNode{}) // one no longer stored
	}
	for want, nodes := range map[State][]driver.WorkflowNode{
		Running:   n(driver.StateSucceeded, driver.StateDead, driver.StatePending),
		Failed:    n(driver.StateSucceeded, driver.StateCancelled),
		Succeeded: n(driver.StateSucceeded, driver.StateSucceeded),
	} {
		if got := Overall(nodes); got != want {
			t.Errorf("Overall = %s, want %s", got, want)
		}
	}
}

// TestCursor: a pass that stops at PerPass leaves the rest to the next
// pass, which starts after it, then wraps around.
func TestCursor(t *testing.T) {
	s := newStore()
	s.add(1, driver.StateRunning, "")
	for id := int64(2); id < 2+PerPass+5; id++ {
		s.add(id, driver.StatePending, driver.OnFailureCancel, 1)
	}
	last := int64(2 + PerPass + 4)
	s.state[last-1], s.held[last-1] = driver.StateCancelled, false // beyond the first pass's reach
	r := releaser(s)
	if c, err := r.RunOnce(t.Context()); err != nil || c != (Counts{}) || r.cursor == 0 {
		t.Fatalf("first pass: %+v, %v, cursor %d", c, err, r.cursor)
	}
	if c, err := r.RunOnce(t.Context()); err != nil || c != (Counts{Dropped: 1}) || r.cursor != 0 {
		t.Fatalf("second pass: %+v, %v, cursor %d", c, err, r.cursor)
	}
}
