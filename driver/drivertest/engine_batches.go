package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	"github.com/keelq/keel/driver"
	ibatch "github.com/keelq/keel/internal/batch"
)

// batchRecorder records the batch callbacks a handler ran, with what the
// handler saw of the batch's members while it ran.
type batchRecorder struct {
	mu     sync.Mutex
	events []batch.Event
	// unfinished counts, per event, the batch's members not in a final
	// state when its callback ran: always 0 when callbacks come after the
	// last member.
	unfinished []int64
}

func (r *batchRecorder) all() ([]batch.Event, []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events), slices.Clone(r.unfinished)
}

// of returns the events of batch id and kind.
func (r *batchRecorder) of(id int64, kind string) []batch.Event {
	evs, _ := r.all()
	var out []batch.Event
	for _, ev := range evs {
		if ev.BatchID == id && ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

type batchMember struct {
	N    int  `json:"n"`
	Fail bool `json:"fail"`
}

// batchClient is a worker for members (bt.member: dead at once when asked
// to fail, else a result) and callbacks (bt.done, recorded in rec).
func (e *env) batchClient(rec *batchRecorder) *keel.Client {
	h := keel.NewHandlers()
	keel.Handle(h, "bt.member", func(ctx context.Context, task *keel.Task[batchMember]) error {
		if task.Args.Fail {
			return keel.Permanent(errors.New("member failed on purpose"))
		}
		return task.SetResult(map[string]int{"square": task.Args.N * task.Args.N})
	})
	var c *keel.Client
	keel.Handle(h, "bt.done", func(ctx context.Context, task *keel.Task[batch.Event]) error {
		info, err := batch.Get(ctx, c, task.Args.BatchID)
		if err != nil {
			return err
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.events = append(rec.events, task.Args)
		rec.unfinished = append(rec.unfinished, info.Pending+info.Running)
		return nil
	})
	c = e.newClient(keel.Config{Handlers: h})
	return c
}

func batchMembers(n int, fail ...int) []keel.TaskSpec {
	out := make([]keel.TaskSpec, n)
	for i := range out {
		out[i] = keel.TaskSpec{Type: "bt.member", Payload: batchMember{N: i, Fail: slices.Contains(fail, i)}}
	}
	return out
}

// testEngineBatch: a batch's on_success and on_finish are enqueued once
// each, after its last member finished, with the final counts and the
// callback's own payload; a batch with a dead member gets on_finish only;
// its members page through by id with their results.
func testEngineBatch(t *testing.T, e *env) {
	rec := &batchRecorder{}
	c := e.batchClient(rec)
	ok, members, err := batch.Enqueue(e.ctx, c, batch.Spec{Tasks: batchMembers(40),
		OnSuccess: &keel.TaskSpec{Type: "bt.done", Payload: map[string]string{"report": "weekly"}},
		OnFinish:  &keel.TaskSpec{Type: "bt.done", Payload: map[string]string{"report": "weekly-finish"}}})
	if err != nil {
		t.Fatal(err)
	}
	if ok.State != batch.Running || ok.Total != 40 || len(members) != 40 || members[0].BatchID != ok.ID {
		t.Fatalf("created %+v with %d members (first %+v)", ok, len(members), members[0])
	}
	failed, _, err := batch.Enqueue(e.ctx, c, batch.Spec{Tasks: batchMembers(10, 3),
		OnSuccess: &keel.TaskSpec{Type: "bt.done"}, OnFinish: &keel.TaskSpec{Type: "bt.done"}})
	if err != nil {
		t.Fatal(err)
	}
	e.startClient(c)
	waitFor(t, "the callbacks", func() bool {
		return len(rec.of(ok.ID, ibatch.OnSuccess)) > 0 && len(rec.of(ok.ID, ibatch.OnFinish)) > 0 &&
			len(rec.of(failed.ID, ibatch.OnFinish)) > 0
	})
	time.Sleep(2500 * time.Millisecond) // two more passes of the finisher: nothing more comes
	evs, unfinished := rec.all()
	if len(evs) != 3 {
		t.Fatalf("callbacks ran %d times, want 3: %+v", len(evs), evs)
	}
	for i, n := range unfinished {
		if n != 0 {
			t.Fatalf("callback %+v ran with %d members unfinished", evs[i], n)
		}
	}
	s := rec.of(ok.ID, ibatch.OnSuccess)[0]
	if s.Total != 40 || s.Succeeded != 40 || s.Dead != 0 || s.Cancelled != 0 || !jsonEqual(s.Data, []byte(`{"report":"weekly"}`)) {
		t.Fatalf("on_success event %+v (data %s)", s, s.Data)
	}
	if f := rec.of(ok.ID, ibatch.OnFinish)[0]; !jsonEqual(f.Data, []byte(`{"report":"weekly-finish"}`)) || f.Succeeded != 40 {
		t.Fatalf("on_finish event %+v (data %s)", f, f.Data)
	}
	if f := rec.of(failed.ID, ibatch.OnFinish)[0]; f.Total != 10 || f.Succeeded != 9 || f.Dead != 1 || !jsonEqual(f.Data, []byte(`{}`)) {
		t.Fatalf("on_finish of the batch with a dead member %+v (data %s)", f, f.Data)
	}

	got, err := batch.Get(e.ctx, c, ok.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != batch.Finished || got.Progress != 1 || got.Succeeded != 40 || got.OnSuccessID == 0 ||
		got.OnFinishID == 0 || got.FinishedAt.IsZero() {
		t.Fatalf("finished batch %+v", got)
	}
	cb, err := c.Get(e.ctx, got.OnSuccessID)
	if err != nil || cb.Type != "bt.done" || cb.State != keel.StateSucceeded {
		t.Fatalf("on_success task %+v, %v", cb, err)
	}
	gotFailed, err := batch.Get(e.ctx, c, failed.ID)
	if err != nil || gotFailed.OnSuccessID != 0 || gotFailed.OnFinishID == 0 || gotFailed.Dead != 1 {
		t.Fatalf("batch with a dead member %+v, %v", gotFailed, err)
	}

	// The members page through by id, each with its result.
	var after int64
	var seen []int64
	for {
		page, err := batch.Members(e.ctx, c, ok.ID, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			var res struct{ Square int }
			if err := json.Unmarshal(m.Result, &res); err != nil || m.BatchID != ok.ID || m.State != keel.StateSucceeded {
				t.Fatalf("member %+v: %v", m, err)
			}
			seen = append(seen, m.ID)
			after = m.ID
		}
	}
	want := make([]int64, len(members))
	for i, m := range members {
		want[i] = m.ID
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("paged members %v, want %v", seen, want)
	}
}

// testEngineBatchOpen: an open batch takes members until sealed and does
// not finish before, however many of them finished; a sealed batch
// refuses more; a missing one is not found.
func testEngineBatchOpen(t *testing.T, e *env) {
	rec := &batchRecorder{}
	c := e.batchClient(rec)
	e.startClient(c)
	open, none, err := batch.Enqueue(e.ctx, c, batch.Spec{Open: true, OnFinish: &keel.TaskSpec{Type: "bt.done"}})
	if err != nil || open.State != batch.Open || len(none) != 0 {
		t.Fatalf("open batch %+v, %d members, %v", open, len(none), err)
	}
	added, err := batch.Add(e.ctx, c, open.ID, batchMembers(5), false)
	if err != nil || len(added) != 5 {
		t.Fatalf("added %d, %v", len(added), err)
	}
	for _, m := range added {
		e.waitState(m.ID, driver.StateSucceeded)
	}
	time.Sleep(2500 * time.Millisecond) // two passes of the finisher
	if evs, _ := rec.all(); len(evs) != 0 {
		t.Fatalf("an open batch finished: %+v", evs)
	}
	if got, err := batch.Get(e.ctx, c, open.ID); err != nil || got.State != batch.Open || got.Succeeded != 5 || got.Total != 5 {
		t.Fatalf("open batch after its members %+v, %v", got, err)
	}
	if _, err := batch.Add(e.ctx, c, open.ID, batchMembers(2), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "on_finish of the sealed batch", func() bool { return len(rec.of(open.ID, ibatch.OnFinish)) == 1 })
	if f := rec.of(open.ID, ibatch.OnFinish)[0]; f.Total != 7 || f.Succeeded != 7 {
		t.Fatalf("on_finish %+v", f)
	}
	if _, err := batch.Add(e.ctx, c, open.ID, batchMembers(1), false); !errors.Is(err, keel.ErrWrongState) {
		t.Fatalf("adding to a sealed batch: %v, want ErrWrongState", err)
	}
	if _, err := batch.Add(e.ctx, c, open.ID+1000, batchMembers(1), false); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("adding to a missing batch: %v, want ErrNotFound", err)
	}
	if _, err := batch.Get(e.ctx, c, open.ID+1000); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("getting a missing batch: %v, want ErrNotFound", err)
	}
	if s, err := batch.Seal(e.ctx, c, open.ID); err != nil || s.State != batch.Finished {
		t.Fatalf("sealing a finished batch again: %+v, %v", s, err)
	}
}

// testEngineBatchBadInput: a batch with a callback no worker can run, a
// bad member, or nothing in it is refused and writes nothing; a member
// whose idempotency key another task holds is returned as the duplicate
// and does not join.
func testEngineBatchBadInput(t *testing.T, e *env) {
	c := e.batchClient(&batchRecorder{})
	before := e.countAll()
	for name, b := range map[string]batch.Spec{
		"callback of an unknown type": {Tasks: batchMembers(3), OnSuccess: &keel.TaskSpec{Type: "bt.nobody"}},
		"bad callback payload":        {Tasks: batchMembers(3), OnFinish: &keel.TaskSpec{Type: "bt.done", Payload: json.RawMessage(`{"a":"\u0000"}`)}},
		"bad member":                  {Tasks: append(batchMembers(3), keel.TaskSpec{Type: "bad type!"})},
		"empty":                       {},
	} {
		_, _, err := batch.Enqueue(e.ctx, c, b)
		if !errors.Is(err, keel.ErrInvalid) && !errors.Is(err, keel.ErrUnknownType) {
			t.Errorf("%s: %v, want ErrInvalid or ErrUnknownType", name, err)
		}
	}
	if _, err := batch.Get(e.ctx, c, 0); !errors.Is(err, keel.ErrInvalid) {
		t.Errorf("batch id 0: %v, want ErrInvalid", err)
	}
	if _, err := batch.Members(e.ctx, c, 1, 0, 0); !errors.Is(err, keel.ErrInvalid) {
		t.Errorf("members page of 0: %v, want ErrInvalid", err)
	}
	if after := e.countAll(); after != before {
		t.Fatalf("refused batches wrote tasks: %d before, %d after", before, after)
	}
	if bs, err := batch.List(e.ctx, c, batch.Filter{}); err != nil || len(bs) != 0 {
		t.Fatalf("refused batches stored %d batches, %v", len(bs), err)
	}

	held, err := c.Enqueue(e.ctx, "bt.member", batchMember{N: 1}, keel.IdempotencyKey("held"))
	if err != nil {
		t.Fatal(err)
	}
	b, ms, err := batch.Enqueue(e.ctx, c, batch.Spec{Tasks: []keel.TaskSpec{
		{Type: "bt.member", Payload: batchMember{N: 1}, Options: []keel.Option{keel.IdempotencyKey("held")}},
		{Type: "bt.member", Payload: batchMember{N: 2}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Total != 1 || !ms[0].Duplicate || ms[0].ID != held.ID || ms[0].BatchID != 0 || ms[1].BatchID != b.ID {
		t.Fatalf("batch %+v members %+v %+v: the duplicate must not join", b, ms[0], ms[1])
	}
}

// testEngineBatchFinishOnce: many calls finishing one batch at once finish
// it once and enqueue each callback once.
func testEngineBatchFinishOnce(t *testing.T, e *env) {
	bt, ok := e.drv.(driver.Batcher)
	if !ok {
		t.Skip("driver keeps no batches")
	}
	now := e.clock.Now()
	cb, err := ibatch.Encode(&driver.InsertParams{Queue: "default", Type: "bt.done", Payload: []byte(`{}`), MaxAttempts: 3, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	row, res, err := bt.CreateBatch(e.ctx, driver.CreateBatchParams{Tasks: []driver.InsertParams{e.params(), e.params()},
		OnSuccess: cb, OnFinish: cb, Seal: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, done, err := bt.FinishBatch(e.ctx, driver.FinishBatchParams{ID: row.ID, Now: func() time.Time { return now }, Callbacks: ibatch.Callbacks}); err != nil || done {
		t.Fatalf("finishing a batch with pending members: done %v, %v", done, err)
	}
	for range res {
		claimed := e.claimOne("w", now)
		e.finish("w", now, driver.Transition{ID: claimed.ID, Fence: claimed.Fence, State: driver.StateSucceeded, Task: &claimed})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	finished := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, done, err := bt.FinishBatch(e.ctx, driver.FinishBatchParams{ID: row.ID, Now: func() time.Time { return now }, Callbacks: ibatch.Callbacks})
			if err != nil {
				t.Error(err)
			}
			if done {
				mu.Lock()
				finished++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	got, counts, err := bt.GetBatch(e.ctx, row.ID)
	if err != nil {
		t.Fatal(err)
	}
	if finished != 1 || got.FinishedAt.IsZero() || got.Succeeded != 2 || counts.Succeeded != 2 || got.OnSuccessID == 0 || got.OnFinishID == 0 {
		t.Fatalf("finished %d times; batch %+v counts %+v", finished, got, counts)
	}
	list, err := e.drv.List(e.ctx, driver.Filter{Type: "bt.done"})
	if err != nil || len(list) != 2 {
		t.Fatalf("callback tasks %d, want 2 (%v)", len(list), err)
	}
	var ev ibatch.Event
	if err := json.Unmarshal(list[0].Payload, &ev); err != nil || ev.BatchID != row.ID || ev.Total != 2 || ev.Succeeded != 2 {
		t.Fatalf("callback payload %s: %v", list[0].Payload, err)
	}

	// Past retention the batch is deleted, its members are not.
	if n, err := bt.PruneBatches(e.ctx, now, 10); err != nil || n != 0 {
		t.Fatalf("pruning batches finished before their finish: %d, %v", n, err)
	}
	if n, err := bt.PruneBatches(e.ctx, now.Add(time.Second), 10); err != nil || n != 1 {
		t.Fatalf("pruning the finished batch: %d, %v", n, err)
	}
	if _, _, err := bt.GetBatch(e.ctx, row.ID); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("a pruned batch: %v, want ErrNotFound", err)
	}
	for _, r := range res {
		if got := e.get(r.Task.ID); got.State != driver.StateSucceeded || got.BatchID != row.ID {
			t.Fatalf("member after its batch was pruned: %+v", got)
		}
	}
}

// countAll counts the tasks in keel_tasks (at most 1,000).
func (e *env) countAll() int {
	e.t.Helper()
	rows, err := e.drv.List(e.ctx, driver.Filter{Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(rows)
}
