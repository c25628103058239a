package drivertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// SequenceDatabaseClock checks a driver that judges time by the database's
// clock (not the caller's): the members of a sequence enqueued by a client
// whose clock is a day behind are held at driver.HeldUntil itself, not at
// an instant relative to the database's now, and its first members are
// due; workers with that clock then run every key's members in enqueue
// order, each released member from the database's now. Enqueues of one member, of two (one statement per task) and of
// twenty at once (the bulk path where a driver has one) are checked. d must
// be fresh and migrated.
func SequenceDatabaseClock(t *testing.T, d driver.Driver) {
	ctx := context.Background()
	skewed := func() time.Time { return time.Now().Add(-24 * time.Hour) }
	var (
		mu  sync.Mutex
		ran = map[string][]int{}
		// released are the members that were held, by id.
		released []int64
	)
	h := keel.NewHandlers()
	keel.Handle(h, "sq.member", func(ctx context.Context, task *keel.Task[seqArgs]) error {
		mu.Lock()
		defer mu.Unlock()
		ran[task.Args.Key] = append(ran[task.Args.Key], task.Args.N)
		if task.Args.N > 0 {
			released = append(released, task.ID)
		}
		return nil
	})
	c, err := keel.NewClient(keel.Config{Driver: d, Handlers: h, Now: skewed, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	enqueue := func(keys, per int) {
		t.Helper()
		var specs []keel.TaskSpec
		for n := range per {
			for k := range keys {
				key := fmt.Sprintf("clock-%d-%d", keys*per, k)
				specs = append(specs, seqSpec(key, n))
				want[key] = per
			}
		}
		infos, err := c.EnqueueMany(ctx, specs)
		if err != nil {
			t.Fatalf("enqueue %d members: %v", len(specs), err)
		}
		for i, info := range infos {
			row, err := d.Get(ctx, info.ID)
			if err != nil {
				t.Fatal(err)
			}
			first := i < keys
			if info.Held == first || driver.Held(row.RunAt) == first {
				t.Fatalf("enqueue of %d: member %d of %s (task %d): held %v, stored run_at %v; want held %v (at %v)",
					len(specs), i/keys, info.Sequence, info.ID, info.Held, row.RunAt, !first, driver.HeldUntil)
			}
			if first && row.RunAt.After(time.Now().Add(time.Minute)) {
				t.Fatalf("enqueue of %d: first member of %s (task %d) runs at %v, want it due now",
					len(specs), info.Sequence, info.ID, row.RunAt)
			}
		}
	}
	enqueue(1, 1)
	enqueue(1, 2)
	enqueue(2, 10)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	waitFor(t, "every member to run", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k, n := range want {
			if len(ran[k]) != n {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for k, ns := range ran {
		if !slices.IsSorted(ns) {
			t.Fatalf("key %s ran its members in the order %v", k, ns)
		}
	}
	// A member released when the one before it finished runs from the
	// database's now, not the worker's (a day behind here, and a worker
	// ahead of the database would have delayed it by as much).
	for _, id := range released {
		row, err := d.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if off := time.Since(row.RunAt); off < -time.Minute || off > 5*time.Minute {
			t.Fatalf("released member (task %d) runs from %v, %v before the database's now", id, row.RunAt, off)
		}
	}
}
