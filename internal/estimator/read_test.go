package estimator_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
	"github.com/keelq/keel/internal/kerr"
)

func TestSpan(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 7, 30, 0, time.UTC)
	p, err := estimator.Span(now.Add(-time.Hour), now, 5*time.Minute)
	if err != nil || !p.First.Equal(time.Date(2026, 12, 2, 11, 5, 0, 0, time.UTC)) || p.Step != 5*time.Minute || p.N != 13 {
		t.Fatalf("an hour in steps of 5m: %+v, %v", p, err)
	}
	if p, err := estimator.Span(now.Add(-time.Second), now, time.Minute); err != nil || p.N != 1 {
		t.Fatalf("a second in steps of 1m: %+v, %v", p, err)
	}
	if p, err := estimator.Span(now.Add(-1999*time.Minute), now, time.Minute); err != nil || p.N != estimator.MaxPoints {
		t.Fatalf("the most points: %+v, %v", p, err)
	}
	for _, c := range []struct {
		since time.Time
		step  time.Duration
		want  string
	}{
		{now.Add(-time.Hour), 30 * time.Second, "history step must be a whole number of minutes, got 30s"},
		{now.Add(-time.Hour), 90 * time.Second, "history step must be a whole number of minutes, got 1m30s"},
		{time.Time{}, time.Minute, "history since must be before now"},
		{now, time.Minute, "history since must be before now"},
		{now.Add(-2000 * time.Minute), time.Minute, "history from 2026-12-01T02:47:30Z in steps of 1m0s is 2001 points, more than 2000"},
	} {
		_, err := estimator.Span(c.since, now, c.step)
		if !errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+c.want {
			t.Errorf("since %v step %v: %v, want %q", c.since, c.step, err, c.want)
		}
	}
}

// recent serves fixed finished tasks and keeps the params it was asked.
type recent struct {
	rows  []driver.FinishedSample
	err   error
	asked driver.RecentParams
}

func (r *recent) RecentFinished(_ context.Context, p driver.RecentParams) ([]driver.FinishedSample, error) {
	r.asked = p
	return r.rows, r.err
}

func TestReadLatency(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	st := &recent{rows: []driver.FinishedSample{
		{ID: 1, Queue: "a", Type: "x", State: driver.StateSucceeded, Attempt: 1, FinishedAt: t0},
		{ID: 2, Queue: "keel", Type: "keel.drill", State: driver.StateSucceeded, Attempt: 1, FinishedAt: t0.Add(time.Second)},
		{ID: 3, Queue: "b", Type: "x", State: driver.StateDead, Attempt: 7, FinishedAt: t0.Add(-time.Second)},
	}}
	skip := func(q, _ string) bool { return q == "keel" }
	l, err := estimator.ReadLatency(context.Background(), st, driver.RecentParams{Since: t0.Add(-time.Hour)}, skip, nil)
	if err != nil || st.asked.Limit != 1000 || !st.asked.Since.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("asked %+v: %v", st.asked, err)
	}
	if l.Sample != 2 || !l.Newest.Equal(t0) || !l.Oldest.Equal(t0.Add(-time.Second)) || l.Succeeded[0] != 1 || l.Dead[4] != 1 ||
		len(l.Queues) != 2 {
		t.Fatalf("latency %+v", l)
	}
	if _, err := estimator.ReadLatency(context.Background(), st, driver.RecentParams{Limit: driver.MaxRecentLimit}, nil, nil); err != nil ||
		st.asked.Limit != driver.MaxRecentLimit {
		t.Fatalf("the largest limit: asked %+v, %v", st.asked, err)
	}
	for _, limit := range []int{-1, driver.MaxRecentLimit + 1} {
		_, err := estimator.ReadLatency(context.Background(), st, driver.RecentParams{Limit: limit}, nil, nil)
		if want := "latency limit must be in 0..10000, got "; !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
	st.err = errors.New("down")
	_, err = estimator.ReadLatency(context.Background(), st, driver.RecentParams{}, nil,
		func(_ context.Context, err error) error { return errors.Join(errors.New("unreachable"), err) })
	if !errors.Is(err, st.err) || !strings.HasPrefix(err.Error(), "keel: read recent finished tasks: unreachable") {
		t.Fatalf("failed read: %v", err)
	}
}
