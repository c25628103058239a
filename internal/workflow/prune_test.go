package workflow

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// pruneStore keeps workflows by id with their creation time and whether a
// task of theirs is still stored, and prunes as a driver does.
type pruneStore struct {
	created map[int64]time.Time
	stored  map[int64]bool
	calls   []driver.PruneWorkflowsParams
	err     error
}

func (s *pruneStore) PruneWorkflows(_ context.Context, p driver.PruneWorkflowsParams) (last, deleted int64, err error) {
	s.calls = append(s.calls, p)
	if s.err != nil {
		return 0, 0, s.err
	}
	var ids []int64
	for id := range s.created {
		if id > p.After {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if len(ids) > p.Limit {
		ids = ids[:p.Limit]
	}
	for _, id := range ids {
		if s.created[id].Before(p.Before) && !s.stored[id] {
			delete(s.created, id)
			deleted++
		}
		last = id
	}
	return last, deleted, nil
}

// TestPrunerDeletesWhatIsGoneAndOld: a pass deletes the workflows with no
// task stored that are older than PruneAge, page after page from where
// the last pass stopped, and starts over once it reached the end; a
// follower prunes nothing.
func TestPrunerDeletesWhatIsGoneAndOld(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	s := &pruneStore{created: map[int64]time.Time{}, stored: map[int64]bool{}}
	total := prunePage*prunePages + prunePage/2 // more than one pass reaches
	for id := int64(1); id <= int64(total); id++ {
		s.created[id] = now.Add(-2 * PruneAge)
	}
	s.stored[7] = true                    // a task of its is still stored
	s.created[9] = now.Add(-PruneAge / 2) // too young
	s.created[int64(total)] = now.Add(-PruneAge / 2)
	leading := false
	p := NewPruner(PrunerConfig{Store: s, Now: func() time.Time { return now }, Leading: func() bool { return leading }})

	p.Run(t.Context())
	if len(s.calls) != 0 {
		t.Fatalf("a follower pruned: %+v", s.calls)
	}
	leading = true
	n, err := p.RunOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(prunePage*prunePages - 2); n != want {
		t.Fatalf("first pass deleted %d, want %d", n, want)
	}
	if len(s.calls) != prunePages || !s.calls[0].Before.Equal(now.Add(-PruneAge)) || s.calls[0].After != 0 {
		t.Fatalf("first pass: %d calls, first %+v", len(s.calls), s.calls[0])
	}
	s.calls = nil
	n, err = p.RunOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != prunePage/2-1 || s.calls[0].After != int64(prunePage*prunePages) {
		t.Fatalf("second pass deleted %d from %d, want %d from %d", n, s.calls[0].After, prunePage/2-1, prunePage*prunePages)
	}
	if p.cursor != 0 {
		t.Fatalf("second pass did not reach the end: cursor %d", p.cursor)
	}
	left := slices.Sorted(func(yield func(int64) bool) {
		for id := range s.created {
			if !yield(id) {
				return
			}
		}
	})
	if want := []int64{7, 9, int64(total)}; !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	// The end reached, the next pass starts over.
	s.calls = nil
	now = now.Add(PruneAge)
	if n, err := p.RunOnce(t.Context()); err != nil || n != 2 || s.calls[0].After != 0 {
		t.Fatalf("third pass: %d, %v, from %d; want 2 (the two grown old) from 0", n, err, s.calls[0].After)
	}

	s.err = errors.New("database down")
	if _, err := p.RunOnce(t.Context()); !errors.Is(err, s.err) {
		t.Fatalf("error %v", err)
	}
}
