package sequence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelq/keel/internal/service/servicetest"
)

// fakeStore releases released members per pass and records its calls.
type fakeStore struct {
	released   int
	settledAt  []time.Time
	limits     []int
	prunedFrom []time.Time
	err        error
}

func (s *fakeStore) SettleSequences(_ context.Context, now time.Time, limit int) (int, error) {
	s.settledAt, s.limits = append(s.settledAt, now), append(s.limits, limit)
	return s.released, s.err
}

func (s *fakeStore) PruneSequences(_ context.Context, before time.Time) (int64, error) {
	s.prunedFrom = append(s.prunedFrom, before)
	return 0, s.err
}

var start = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// TestSettlesEveryPassPrunesEveryMinute: each pass settles up to PerPass
// keys at the clock's time and reports what it released; the idle keys are
// forgotten on the first pass and then once per PruneEvery, those idle
// for IdleFor.
func TestSettlesEveryPassPrunesEveryMinute(t *testing.T) {
	clk := servicetest.NewClock(start)
	st := &fakeStore{released: 3}
	var released []int
	s := New(Config{Store: st, Now: clk.Now, Released: func(n int) { released = append(released, n) }})
	for range 61 {
		if err := s.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(Interval)
	}
	if len(st.settledAt) != 61 || !st.settledAt[60].Equal(start.Add(60*Interval)) || st.limits[0] != PerPass {
		t.Fatalf("settled %d times (last at %v, limit %d), want 61 times, the last at %v, limit %d",
			len(st.settledAt), st.settledAt[len(st.settledAt)-1], st.limits[0], start.Add(60*Interval), PerPass)
	}
	if want := []time.Time{start.Add(-IdleFor), start.Add(PruneEvery - IdleFor)}; len(st.prunedFrom) != 2 ||
		!st.prunedFrom[0].Equal(want[0]) || !st.prunedFrom[1].Equal(want[1]) {
		t.Fatalf("pruned before %v, want %v", st.prunedFrom, want)
	}
	if len(released) != 61 || released[0] != 3 {
		t.Fatalf("released reported %v, want 3 per pass", released)
	}
}

// TestFollowersDoNothing: a process that does not lead never settles.
func TestFollowersDoNothing(t *testing.T) {
	st := &fakeStore{}
	s := New(Config{Store: st, Now: servicetest.NewClock(start).Now, Leading: func() bool { return false }})
	s.Run(t.Context())
	if len(st.settledAt)+len(st.prunedFrom) != 0 {
		t.Fatalf("a follower settled %d and pruned %d times", len(st.settledAt), len(st.prunedFrom))
	}
}

// TestErrorsAreReturned: a store error ends the pass with it, and Run logs
// it rather than stopping.
func TestErrorsAreReturned(t *testing.T) {
	boom := errors.New("database down")
	s := New(Config{Store: &fakeStore{err: boom}, Now: servicetest.NewClock(start).Now})
	if err := s.RunOnce(t.Context()); !errors.Is(err, boom) {
		t.Fatalf("RunOnce: %v, want %v", err, boom)
	}
	s.Run(t.Context()) // logged, not panicking
}
