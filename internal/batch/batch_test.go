package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
)

// fakeStore finishes the batches listed in done, with counts, through
// the callbacks it is given, as a driver would in its transaction.
type fakeStore struct {
	open         []int64
	done         map[int64]driver.BatchCounts
	rows         map[int64]*driver.BatchRow
	inserted     []driver.InsertParams
	prunedBefore []time.Time
	err          error
}

func (s *fakeStore) UnfinishedBatches(context.Context, int) ([]int64, error) { return s.open, s.err }

func (s *fakeStore) PruneBatches(_ context.Context, before time.Time, _ int) (int64, error) {
	s.prunedBefore = append(s.prunedBefore, before)
	return 0, s.err
}

func (s *fakeStore) FinishBatch(_ context.Context, p driver.FinishBatchParams) (*driver.BatchRow, bool, error) {
	c, ok := s.done[p.ID]
	b := s.rows[p.ID]
	if !ok || !b.FinishedAt.IsZero() {
		return b, false, nil
	}
	now := p.Now()
	onSuccess, onFinish, err := p.Callbacks(b, c, now)
	if err != nil {
		return nil, false, err
	}
	for _, cb := range []*driver.InsertParams{onSuccess, onFinish} {
		if cb != nil {
			s.inserted = append(s.inserted, *cb)
		}
	}
	b.FinishedAt, b.Succeeded, b.Dead, b.Cancelled = now, c.Succeeded, c.Dead, c.Cancelled
	return b, true, nil
}

func callbackDoc(t *testing.T, typ string) []byte {
	t.Helper()
	b, err := Encode(&driver.InsertParams{Queue: "q", Type: typ, Payload: []byte(`{"a":1}`), MaxAttempts: 2, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFinisherFinishesDoneBatches: a pass finishes the batches whose
// members all finished, once each, enqueuing on_success only when every
// member succeeded, and tells Finished; the others wait.
func TestFinisherFinishesDoneBatches(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &fakeStore{open: []int64{1, 2, 3}, rows: map[int64]*driver.BatchRow{}, done: map[int64]driver.BatchCounts{
		1: {Succeeded: 3},
		2: {Succeeded: 2, Dead: 1},
	}}
	for id := int64(1); id <= 3; id++ {
		s.rows[id] = &driver.BatchRow{ID: id, Total: 3, OnSuccess: callbackDoc(t, "ok"), OnFinish: callbackDoc(t, "fin")}
	}
	var told []int64
	f := New(Config{Store: s, Now: func() time.Time { return now }, Finished: func(b *driver.BatchRow) { told = append(told, b.ID) }})
	for range 2 { // a second pass finds them finished
		if err := f.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if len(told) != 2 || told[0] != 1 || told[1] != 2 {
		t.Fatalf("finished %v, want [1 2]", told)
	}
	var kinds []string
	for _, p := range s.inserted {
		var ev Event
		if err := json.Unmarshal(p.Payload, &ev); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, p.Type+":"+ev.Kind)
		if p.IdemKey != Key(ev.BatchID, ev.Kind) || !p.RunAt.Equal(now) || string(ev.Data) != `{"a":1}` {
			t.Fatalf("callback %+v, event %+v", p, ev)
		}
	}
	if want := "[ok:on_success fin:on_finish fin:on_finish]"; fmt.Sprint(kinds) != want {
		t.Fatalf("callbacks %v, want %s", kinds, want)
	}
	if !Succeeded(s.rows[1]) || Succeeded(s.rows[2]) {
		t.Fatal("Succeeded misjudges the batches")
	}
}

// TestFinisherLeaderOnlyAndErrors: Run does nothing unless leading, and a
// pass that fails returns the store's error.
func TestFinisherLeaderOnlyAndErrors(t *testing.T) {
	s := &fakeStore{open: []int64{1}, rows: map[int64]*driver.BatchRow{1: {ID: 1, Total: 1}},
		done: map[int64]driver.BatchCounts{1: {Succeeded: 1}}}
	finished := 0
	f := New(Config{Store: s, Leading: func() bool { return false }, Finished: func(*driver.BatchRow) { finished++ }})
	f.Run(t.Context())
	if finished != 0 {
		t.Fatal("a node that does not lead finished a batch")
	}
	s.err = errors.New("down")
	if err := New(Config{Store: s}).RunOnce(t.Context()); !errors.Is(err, s.err) {
		t.Fatalf("RunOnce: %v, want the store's error", err)
	}
}

// TestBuildRefusesABadDocument: a stored callback that cannot be read
// fails the finish instead of enqueuing a wrong task.
func TestBuildRefusesABadDocument(t *testing.T) {
	if _, err := Build(OnSuccess, []byte(`{"type":`), &driver.BatchRow{ID: 1}, driver.BatchCounts{}, time.Now()); err == nil {
		t.Fatal("a broken callback document was built")
	}
}

// TestFinisherPrunesOncePerInterval: with a retention, finished batches
// older than it are deleted at the first pass and then once every
// PruneEvery; without one, never.
func TestFinisherPrunesOncePerInterval(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &fakeStore{}
	f := New(Config{Store: s, Now: func() time.Time { return now }, Retention: 48 * time.Hour})
	for _, step := range []time.Duration{0, time.Second, PruneEvery} {
		now = now.Add(step)
		if err := f.RunOnce(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.prunedBefore) != 2 || !s.prunedBefore[1].Equal(now.Add(-48*time.Hour)) {
		t.Fatalf("pruned before %v, want twice, the last before %v", s.prunedBefore, now.Add(-48*time.Hour))
	}
	keep := &fakeStore{}
	if err := New(Config{Store: keep}).RunOnce(t.Context()); err != nil || len(keep.prunedBefore) != 0 {
		t.Fatalf("pruned without a retention: %v, %v", keep.prunedBefore, err)
	}
}

// TestRetention: a finished batch is kept while its members could be
// read; for ever when archived tasks are.
func TestRetention(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct{ succeeded, dead, deleteAfter, want time.Duration }{
		{30 * day, 30 * day, 0, 0},
		{30 * day, 30 * day, 7 * day, 37 * day},
		{day, 14 * day, 2 * day, 16 * day},
		{20 * day, 7 * day, time.Hour, 20*day + time.Hour},
	} {
		if got := Retention(c.succeeded, c.dead, c.deleteAfter); got != c.want {
			t.Errorf("Retention(%v, %v, %v) = %v, want %v", c.succeeded, c.dead, c.deleteAfter, got, c.want)
		}
	}
}
