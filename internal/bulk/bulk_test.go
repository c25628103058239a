package bulk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

func TestFilter(t *testing.T) {
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	f, err := Filter(driver.Filter{Type: "mail.send", FinishedBefore: at})
	if err != nil || f.State != driver.StateDead || f.Limit != 1000 || f.Type != "mail.send" || !f.FinishedBefore.Equal(at) {
		t.Fatalf("defaults: %+v, %v", f, err)
	}
	if f, err := Filter(driver.Filter{State: driver.StateCancelled, Limit: 10000, IDs: []int64{3, 1}}); err != nil ||
		f.State != driver.StateCancelled || f.Limit != 10000 {
		t.Fatalf("cancelled, 10000: %+v, %v", f, err)
	}
	for _, c := range []struct {
		f    driver.Filter
		want string
	}{
		{driver.Filter{FinishedAfter: time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC)}, "finished_after 0999-01-01T00:00:00Z is out of range"},
		{driver.Filter{Type: "bad type"}, `invalid task type "bad type"`},
		{driver.Filter{Queue: "bad/queue"}, `invalid queue name "bad/queue"`},
		{driver.Filter{FinishedAfter: at, FinishedBefore: at}, "finished_after must be before finished_before"},
		{driver.Filter{State: driver.StatePending}, `filter state must be dead or cancelled, got "pending"`},
		{driver.Filter{Limit: 10001}, "filter limit must be in 1..10000, got 10001"},
		{driver.Filter{Limit: -1}, "filter limit must be in 1..10000, got -1"},
		{driver.Filter{CreatedAfter: at}, "filter created_after and created_before do not apply"},
		{driver.Filter{BeforeID: 5}, "filter before_id and after_id do not apply"},
		{driver.Filter{IDs: make([]int64, driver.MaxBulkIDs+1)}, "filter at most 1000 ids at once"},
	} {
		_, err := Filter(c.f)
		if !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), "keel: invalid input: "+c.want) {
			t.Errorf("%+v: %v, want %q", c.f, err, c.want)
		}
	}
}

// store records the filters it was given and answers n, or fails.
type store struct {
	got []driver.Filter
	at  time.Time
	n   int64
	err error
}

func (s *store) RetryMatching(_ context.Context, f driver.Filter, now time.Time) (int64, error) {
	s.got, s.at = append(s.got, f), now
	return s.n, s.err
}

func (s *store) PurgeMatching(_ context.Context, f driver.Filter) (int64, error) {
	s.got = append(s.got, f)
	return s.n, s.err
}

// TestOps: the store gets the checked filter with its defaults, never a
// bad one; its errors are wrapped with what was being done.
func TestOps(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	st := &store{n: 3}
	ops := Ops{Store: st, Now: func() time.Time { return now }}
	ctx := context.Background()
	if n, err := ops.Retry(ctx, driver.Filter{Queue: "mail"}); n != 3 || err != nil || !st.at.Equal(now) {
		t.Fatalf("retry: %d, %v at %v", n, err, st.at)
	}
	if n, err := ops.Purge(ctx, driver.Filter{State: driver.StateCancelled, Limit: 5}); n != 3 || err != nil {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if len(st.got) != 2 || st.got[0].State != driver.StateDead || st.got[0].Limit != 1000 || st.got[0].Queue != "mail" ||
		st.got[1].State != driver.StateCancelled || st.got[1].Limit != 5 {
		t.Fatalf("filters given: %+v", st.got)
	}
	for _, op := range []func(context.Context, driver.Filter) (int64, error){ops.Retry, ops.Purge} {
		if _, err := op(ctx, driver.Filter{State: driver.StatePending}); !errors.Is(err, kerr.ErrInvalid) {
			t.Errorf("bad filter: %v", err)
		}
	}
	if len(st.got) != 2 {
		t.Fatalf("a bad filter reached the store: %+v", st.got)
	}
	st.err = errors.New("down")
	ops.Wrap = func(_ context.Context, err error) error { return fmt.Errorf("unreachable: %w", err) }
	if _, err := ops.Retry(ctx, driver.Filter{}); !errors.Is(err, st.err) || err.Error() != "keel: requeue tasks: unreachable: down" {
		t.Errorf("failed retry: %v", err)
	}
	if _, err := ops.Purge(ctx, driver.Filter{}); !errors.Is(err, st.err) || err.Error() != "keel: purge tasks: unreachable: down" {
		t.Errorf("failed purge: %v", err)
	}
}
