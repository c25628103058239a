package keel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/keelq/keel"
)

// TestGetByKey: the caller's key finds the task that holds it; a UniqueBy
// natural key, a cancelled task's released key and bad keys do not.
func TestGetByKey(t *testing.T) {
	c, _ := setup(t)
	ctx := context.Background()
	held, err := c.Enqueue(ctx, "t.known", payload{N: 1}, keel.IdempotencyKey("order-7"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, "t.known", payload{N: 2}, keel.UniqueBy("natural")); err != nil {
		t.Fatal(err)
	}
	cancelled, err := c.Enqueue(ctx, "t.known", payload{N: 3}, keel.IdempotencyKey("gone"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetByKey(ctx, "order-7")
	if err != nil || got.ID != held.ID {
		t.Fatalf("order-7: %+v, %v; want task %d", got, err, held.ID)
	}
	for _, k := range []string{"natural", "gone", "order-8", "k:order-7"} {
		if got, err := c.GetByKey(ctx, k); !errors.Is(err, keel.ErrNotFound) {
			t.Errorf("key %q: %+v, %v; want ErrNotFound", k, got, err)
		}
	}
	for _, k := range []string{"", strings.Repeat("x", 256), "a\x00b"} {
		if _, err := c.GetByKey(ctx, k); !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("key %q: %v, want ErrInvalid", k, err)
		}
	}
}

// TestBulkIDsInput: List refuses IDs; bulk operations refuse too many or
// bad ids, writing nothing; Latency refuses a bad limit and reads an empty
// sample from a fresh database.
func TestBulkIDsInput(t *testing.T) {
	c, _ := setup(t)
	ctx := context.Background()
	task, err := c.Enqueue(ctx, "t.known", payload{N: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, keel.Filter{IDs: []int64{task.ID}}); !errors.Is(err, keel.ErrInvalid) {
		t.Errorf("list with ids: %v, want ErrInvalid", err)
	}
	many := make([]int64, 1001)
	for i := range many {
		many[i] = int64(i + 1)
	}
	for _, ids := range [][]int64{many, {0}, {task.ID, -3}} {
		f := keel.Filter{State: keel.StateCancelled, IDs: ids}
		if _, err := c.PurgeMatching(ctx, f); !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("purge %d ids: %v, want ErrInvalid", len(ids), err)
		}
		if _, err := c.RetryMatching(ctx, f); !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("retry %d ids: %v, want ErrInvalid", len(ids), err)
		}
	}
	if got, err := c.Get(ctx, task.ID); err != nil || got.State != keel.StateCancelled {
		t.Fatalf("after bad calls: %+v, %v", got, err)
	}
	if n, err := c.RetryMatching(ctx, keel.Filter{State: keel.StateCancelled, IDs: []int64{task.ID}}); err != nil || n != 1 {
		t.Fatalf("retry by id: %d, %v", n, err)
	}
	for _, limit := range []int{-1, 10001} {
		if _, err := c.Latency(ctx, keel.LatencyParams{Limit: limit}); !errors.Is(err, keel.ErrInvalid) {
			t.Errorf("latency limit %d: %v, want ErrInvalid", limit, err)
		}
	}
	l, err := c.Latency(ctx, keel.LatencyParams{})
	if err != nil || l.Sample != 0 || l.All.Tasks != 0 {
		t.Fatalf("latency of nothing finished: %+v, %v", l, err)
	}
}
