package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// seqRun is one run of a sequence member, as its handler saw it.
type seqRun struct {
	key        string
	n          int
	id         int64
	start, end time.Time
}

type seqArgs struct {
	Key  string `json:"key"`
	N    int    `json:"n"`
	Fail bool   `json:"fail"`
}

// seqRecorder records the runs of sequence members.
type seqRecorder struct {
	mu   sync.Mutex
	runs []seqRun
	// fail makes members with Fail set dead at once while true.
	fail atomic.Bool
}

func (r *seqRecorder) all() []seqRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs)
}

// seqClient is a worker of "sq.member" tasks, which sleep for pause and
// record their run in rec.
func (e *env) seqClient(rec *seqRecorder, pause time.Duration, workers int) *keel.Client {
	h := keel.NewHandlers()
	keel.Handle(h, "sq.member", func(ctx context.Context, task *keel.Task[seqArgs]) error {
		run := seqRun{key: task.Args.Key, n: task.Args.N, id: task.ID, start: time.Now()}
		if task.Args.Fail && rec.fail.Load() {
			return keel.Permanent(errors.New("member failed on purpose"))
		}
		time.Sleep(pause)
		run.end = time.Now()
		rec.mu.Lock()
		rec.runs = append(rec.runs, run)
		rec.mu.Unlock()
		return nil
	})
	return e.newClient(keel.Config{Handlers: h, Queues: map[string]keel.QueueConfig{keel.DefaultQueue: {MaxWorkers: workers}}})
}

func seqSpec(key string, n int, opts ...keel.Option) keel.TaskSpec {
	return keel.TaskSpec{Type: "sq.member", Payload: seqArgs{Key: key, N: n}, Options: append([]keel.Option{keel.Sequence(key)}, opts...)}
}

// checkSequences fails unless, within each key, the runs do not overlap
// and ran in enqueue order (n), and unless at least two keys overlapped.
func checkSequences(t *testing.T, runs []seqRun, perKey int) {
	t.Helper()
	byKey := map[string][]seqRun{}
	for _, r := range runs {
		byKey[r.key] = append(byKey[r.key], r)
	}
	for key, rs := range byKey {
		slices.SortFunc(rs, func(a, b seqRun) int { return a.start.Compare(b.start) })
		if len(rs) != perKey {
			t.Fatalf("key %s ran %d members, want %d", key, len(rs), perKey)
		}
		for i, r := range rs {
			if r.n != i {
				t.Fatalf("key %s: run %d was member %d: out of enqueue order", key, i, r.n)
			}
			if i > 0 && r.start.Before(rs[i-1].end) {
				t.Fatalf("key %s: member %d started at %v, before member %d ended at %v", key, r.n, r.start, rs[i-1].n, rs[i-1].end)
			}
		}
	}
	parallel := false
	for _, a := range runs {
		for _, b := range runs {
			if a.key != b.key && a.start.Before(b.end) && b.start.Before(a.end) {
				parallel = true
			}
		}
	}
	if !parallel {
		t.Fatal("no two keys ever ran at the same time")
	}
}

// testEngineSequenceOrder: three clients work 5 keys × 20 members,
// enqueued interleaved and some several at once; each key's members run
// one at a time, in enqueue order, while the keys run in parallel.
func testEngineSequenceOrder(t *testing.T, e *env) {
	rec := &seqRecorder{}
	const keys, per = 5, 20
	c := e.seqClient(rec, 3*time.Millisecond, 4)
	for n := 0; n < per; n += 2 {
		var specs []keel.TaskSpec
		for k := range keys {
			specs = append(specs, seqSpec(fmt.Sprintf("customer-%d", k), n), seqSpec(fmt.Sprintf("customer-%d", k), n+1))
		}
		infos, err := c.EnqueueMany(e.ctx, specs)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && (infos[0].Held || !infos[1].Held) {
			t.Fatalf("first enqueue: first member held %v, second %v; want ready then held", infos[0].Held, infos[1].Held)
		}
	}
	for range 3 {
		e.startClient(e.seqClient(rec, 3*time.Millisecond, 4))
	}
	waitFor(t, "every member to succeed", func() bool {
		done, err := c.List(e.ctx, keel.Filter{State: keel.StateSucceeded, Limit: 1000})
		return err == nil && len(done) == keys*per
	})
	checkSequences(t, rec.all(), per)
	e.checkCounters("after the sequences")
}

// testEngineSequenceDeadHolds: a dead member holds its key (listed as
// blocked, the next member held) until it is retried and succeeds; with
// SequenceSkipDead the next member runs at once.
func testEngineSequenceDeadHolds(t *testing.T, e *env) {
	rec := &seqRecorder{}
	rec.fail.Store(true)
	c := e.seqClient(rec, 0, 2)
	poison := keel.TaskSpec{Type: "sq.member", Payload: seqArgs{Key: "held", N: 0, Fail: true}, Options: []keel.Option{keel.Sequence("held")}}
	infos, err := c.EnqueueMany(e.ctx, []keel.TaskSpec{poison, seqSpec("held", 1),
		{Type: "sq.member", Payload: seqArgs{Key: "skip", N: 0, Fail: true}, Options: []keel.Option{keel.Sequence("skip"), keel.SequenceSkipDead()}},
		seqSpec("skip", 1, keel.SequenceSkipDead())})
	if err != nil {
		t.Fatal(err)
	}
	e.startClient(c)
	waitFor(t, "the skipped key's second member", func() bool {
		return slices.ContainsFunc(rec.all(), func(r seqRun) bool { return r.key == "skip" && r.n == 1 })
	})
	e.waitTask(infos[0].ID, "the poison member dead", func(r *driver.TaskRow) bool { return r.State == driver.StateDead })
	time.Sleep(1500 * time.Millisecond) // a pass of the leader's settler
	if got, _ := c.Get(e.ctx, infos[1].ID); got.State != keel.StatePending || !got.Held {
		t.Fatalf("member behind a dead one: %s held %v, want pending and held", got.State, got.Held)
	}
	seq := e.drv.(driver.Sequencer)
	blocked, err := seq.BlockedSequences(e.ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked) != 1 || blocked[0].Key != "held" || blocked[0].DeadID != infos[0].ID || blocked[0].Waiting != 1 || blocked[0].Since.IsZero() {
		t.Fatalf("blocked sequences %+v, want key held by task %d with 1 waiting", blocked, infos[0].ID)
	}
	rec.fail.Store(false)
	if _, err := c.Retry(e.ctx, infos[0].ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the held key's second member", func() bool {
		return slices.ContainsFunc(rec.all(), func(r seqRun) bool { return r.key == "held" && r.n == 1 })
	})
	if blocked, err = seq.BlockedSequences(e.ctx, "", 10); err != nil || len(blocked) != 0 {
		t.Fatalf("blocked after the retry: %+v, %v", blocked, err)
	}
}

// testEngineSequenceCancelReleases: cancelling a key's running member, or
// a held one, lets the rest of the key go on, in order.
func testEngineSequenceCancelReleases(t *testing.T, e *env) {
	rec := &seqRecorder{}
	h := keel.NewHandlers()
	started := make(chan int64, 4)
	keel.Handle(h, "sq.member", func(ctx context.Context, task *keel.Task[seqArgs]) error {
		if task.Args.N == 0 {
			started <- task.ID
			<-ctx.Done() // runs until cancelled
			return ctx.Err()
		}
		rec.mu.Lock()
		rec.runs = append(rec.runs, seqRun{key: task.Args.Key, n: task.Args.N, id: task.ID, start: time.Now(), end: time.Now()})
		rec.mu.Unlock()
		return nil
	})
	c := e.newClient(keel.Config{Handlers: h})
	infos, err := c.EnqueueMany(e.ctx, []keel.TaskSpec{seqSpec("k", 0), seqSpec("k", 1), seqSpec("k", 2)})
	if err != nil {
		t.Fatal(err)
	}
	e.startClient(c)
	<-started
	if _, err := c.Cancel(e.ctx, infos[1].ID); err != nil { // held
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	if runs := rec.all(); len(runs) != 0 {
		t.Fatalf("members ran while the first still runs: %+v", runs)
	}
	if _, err := c.Cancel(e.ctx, infos[0].ID); err != nil { // running
		t.Fatal(err)
	}
	waitFor(t, "the third member", func() bool { return len(rec.all()) == 1 })
	if r := rec.all()[0]; r.id != infos[2].ID {
		t.Fatalf("ran %+v, want task %d", r, infos[2].ID)
	}
	e.waitTask(infos[2].ID, "the third member to succeed", func(r *driver.TaskRow) bool { return r.State == driver.StateSucceeded })
	e.checkCounters("after the cancels")
}

// testEngineSequenceBadInput: a sequence key that is empty, too long, not
// UTF-8 or holds NUL, and SequenceSkipDead alone are refused with
// ErrInvalid, and nothing is written; Handle refuses Sequence.
func testEngineSequenceBadInput(t *testing.T, e *env) {
	h := keel.NewHandlers()
	keel.Handle(h, "sq.member", func(ctx context.Context, task *keel.Task[seqArgs]) error { return nil })
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Sequence apply to single tasks only") {
				t.Errorf("Handle with Sequence: panic %v, want one naming Sequence", r)
			}
		}()
		keel.Handle(h, "sq.typed", func(ctx context.Context, task *keel.Task[seqArgs]) error { return nil }, keel.Sequence("k"))
	}()
	c := e.newClient(keel.Config{Handlers: h})
	before, err := c.List(e.ctx, keel.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]keel.TaskSpec{
		"empty key":     seqSpec("", 0),
		"long key":      seqSpec(strings.Repeat("k", driver.MaxSequenceKey+1), 0),
		"invalid UTF-8": seqSpec("k\xff", 0),
		"NUL":           seqSpec("k\x00", 0),
		"skip alone":    {Type: "sq.member", Payload: seqArgs{}, Options: []keel.Option{keel.SequenceSkipDead()}},
	}
	for name, spec := range cases {
		// With a good task before it: the whole call writes nothing.
		if _, err := c.EnqueueMany(e.ctx, []keel.TaskSpec{seqSpec("good", 0), spec}); !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	after, err := c.List(e.ctx, keel.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("bad input wrote %d tasks", len(after)-len(before))
	}
}
