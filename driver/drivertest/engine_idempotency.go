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
	"github.com/keelq/keel/driver"
)

func testEngineUniqueBy(t *testing.T, e *env) {
	c := e.enqueuer()
	payload := map[string]any{"order": 7, "items": []string{"a", "b"}}
	first, err := c.Enqueue(e.ctx, "dt.task", payload, keel.UniqueBy("order-7"))
	if err != nil || first.Duplicate {
		t.Fatalf("first: %+v, %v", first, err)
	}
	// Same content (keys in another order, other whitespace) → the same task.
	second, err := c.Enqueue(e.ctx, "dt.task", []byte(`{ "items": ["a","b"], "order": 7 }`), keel.UniqueBy("order-7"))
	if err != nil || !second.Duplicate || second.ID != first.ID {
		t.Fatalf("same content: %+v, %v; want duplicate of %d", second, err, first.ID)
	}
	// Changed content is new work; so is another natural key or type.
	changed, err := c.Enqueue(e.ctx, "dt.task", map[string]any{"order": 7, "items": []string{"a"}}, keel.UniqueBy("order-7"))
	if err != nil || changed.Duplicate || changed.ID == first.ID {
		t.Fatalf("changed content: %+v, %v", changed, err)
	}
	otherKey, err := c.Enqueue(e.ctx, "dt.task", payload, keel.UniqueBy("order-8"))
	if err != nil || otherKey.Duplicate {
		t.Fatalf("other natural key: %+v, %v", otherKey, err)
	}
	otherType, err := c.Enqueue(e.ctx, "dt.other", payload, keel.UniqueBy("order-7"))
	if err != nil || otherType.Duplicate {
		t.Fatalf("other type: %+v, %v", otherType, err)
	}
	if n := e.total(); n != 4 {
		t.Fatalf("%d tasks, want 4", n)
	}
}

func testEngineIdemConcurrent(t *testing.T, e *env) {
	c := e.enqueuer()
	const n = 100
	var wg sync.WaitGroup
	infos := make([]*keel.TaskInfo, n)
	errs := make([]error, n)
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			infos[i], errs[i] = c.Enqueue(e.ctx, "dt.task", args{N: 1}, keel.IdempotencyKey("pay-42"))
		}()
	}
	close(gate)
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("submission %d: %v", i, errs[i])
		}
		if infos[i].ID != infos[0].ID {
			t.Fatalf("submission %d got task %d, submission 0 got %d", i, infos[i].ID, infos[0].ID)
		}
		if !infos[i].Duplicate {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d submissions inserted, want exactly 1", fresh)
	}
	if rows := e.all(); len(rows) != 1 {
		t.Fatalf("%d tasks, want 1", len(rows))
	}
}

func testEngineIdemConflict(t *testing.T, e *env) {
	c := e.enqueuer()
	first, err := c.Enqueue(e.ctx, "dt.task", args{N: 1}, keel.IdempotencyKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Enqueue(e.ctx, "dt.task", args{N: 1}, keel.IdempotencyKey("k1"))
	if err != nil || !again.Duplicate || again.ID != first.ID {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	if _, err := c.Enqueue(e.ctx, "dt.task", args{N: 2}, keel.IdempotencyKey("k1")); !errors.Is(err, keel.ErrIdempotencyConflict) {
		t.Fatalf("same key, other payload: %v, want ErrIdempotencyConflict", err)
	}
	if _, err := c.Enqueue(e.ctx, "dt.other", args{N: 1}, keel.IdempotencyKey("k1")); !errors.Is(err, keel.ErrIdempotencyConflict) {
		t.Fatalf("same key, other type: %v, want ErrIdempotencyConflict", err)
	}
	_, err = c.EnqueueMany(e.ctx, []keel.TaskSpec{
		{Type: "dt.task", Payload: args{N: 3}},
		{Type: "dt.task", Payload: args{N: 2}, Options: []keel.Option{keel.IdempotencyKey("k1")}},
	})
	if !errors.Is(err, keel.ErrIdempotencyConflict) {
		t.Fatalf("batch with a conflict: %v, want ErrIdempotencyConflict", err)
	}
	rows := e.all()
	if len(rows) != 1 || rows[0].ID != first.ID || !jsonEqual(rows[0].Payload, []byte(`{"n":1}`)) {
		t.Fatalf("conflicts wrote tasks: %d rows", len(rows))
	}
}

func testEngineResubmit(t *testing.T, e *env) {
	var rec recorder
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		rec.add(task.Args.N)
		if task.Args.N == 1 {
			return keel.Permanent(errors.New("no"))
		}
		return nil
	})
	dead := e.enqueue(c, 1, keel.IdempotencyKey("k-dead"))
	e.waitState(dead.ID, driver.StateDead)
	again := e.enqueue(c, 1, keel.IdempotencyKey("k-dead"))
	if again.Duplicate || again.ID == dead.ID {
		t.Fatalf("resubmission after dead: %+v", again)
	}
	e.waitState(again.ID, driver.StateDead) // it ran

	cancelled := e.enqueue(c, 2, keel.UniqueBy("u"), keel.Delay(time.Hour))
	if _, err := c.Cancel(e.ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	fresh := e.enqueue(c, 2, keel.UniqueBy("u"))
	if fresh.Duplicate || fresh.ID == cancelled.ID {
		t.Fatalf("resubmission after cancel: %+v", fresh)
	}
	e.waitState(fresh.ID, driver.StateSucceeded)
	dup := e.enqueue(c, 2, keel.UniqueBy("u"))
	if !dup.Duplicate || dup.ID != fresh.ID || dup.State != keel.StateSucceeded {
		t.Fatalf("resubmission after success must return the succeeded task: %+v", dup)
	}
	if got := rec.list(); !slices.Equal(got, []int{1, 1, 2}) {
		t.Fatalf("handler runs %v", got)
	}
}

// testEngineEnqueueCancelled: enqueues whose context ends at random
// moments either fail and write nothing, or succeed and are stored.
func testEngineEnqueueCancelled(t *testing.T, e *env) {
	c := e.enqueuer()
	const n = 200
	ok := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(e.ctx, time.Duration(i%7)*300*time.Microsecond)
			defer cancel()
			_, err := c.Enqueue(ctx, "dt.task", args{N: i})
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("enqueue %d: %v", i, err)
			}
			ok[i] = err == nil
		}()
	}
	wg.Wait()
	stored := map[int]bool{}
	for _, r := range e.all() {
		var a struct{ N int }
		if err := json.Unmarshal(r.Payload, &a); err != nil {
			t.Fatal(err)
		}
		if stored[a.N] {
			t.Fatalf("task %d stored twice", a.N)
		}
		stored[a.N] = true
	}
	succeeded := 0
	for i := range n {
		if ok[i] != stored[i] {
			t.Fatalf("enqueue %d: returned success %v but stored %v", i, ok[i], stored[i])
		}
		if ok[i] {
			succeeded++
		}
	}
	t.Logf("%d of %d enqueues succeeded before their deadline", succeeded, n)
}
