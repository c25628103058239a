package sqlite

import (
	"context"
	"testing"
	"time"
)

// TestTurns: a waiting caller goes before the writer until the writer has
// waited its patience, then the writer goes next; a side alone takes turn
// after turn; a wait ends with its context.
func TestTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newTurns()
	tr.patience = 300 * time.Millisecond
	got := make(chan role, 4)
	waitFor := func(r role) {
		go func() {
			if err := tr.take(ctx, r); err != nil {
				t.Error(err)
				return
			}
			got <- r
		}()
	}
	waiting := func(writer bool, callers int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			tr.mu.Lock()
			ok := tr.writerWaiting == writer && tr.callers == callers
			tr.mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never %v writer and %d callers waiting", writer, callers)
			}
		}
	}

	// A caller holds the turn; the writer, then a caller, wait. Within
	// the writer's patience the caller goes first.
	if err := tr.take(ctx, roleCaller); err != nil {
		t.Fatal(err)
	}
	waitFor(roleWriter)
	waiting(true, 0)
	waitFor(roleCaller)
	waiting(true, 1)
	tr.give()
	if r := <-got; r != roleCaller {
		t.Fatalf("within the writer's patience, %d went first; want the caller", r)
	}
	// Past its patience the writer goes before the next caller.
	time.Sleep(tr.patience)
	waitFor(roleCaller)
	waiting(true, 1)
	tr.give()
	if r := <-got; r != roleWriter {
		t.Fatalf("past the writer's patience, %d went first; want the writer", r)
	}
	tr.give()
	if r := <-got; r != roleCaller {
		t.Fatalf("then %d; want the caller", r)
	}
	tr.give()

	// The writer waiting for a caller that holds on goes as soon as the
	// turn is given, its patience or not.
	if err := tr.take(ctx, roleCaller); err != nil {
		t.Fatal(err)
	}
	waitFor(roleWriter)
	waiting(true, 0)
	tr.give()
	if r := <-got; r != roleWriter {
		t.Fatalf("%d; want the writer", r)
	}
	tr.give()

	// Alone, a side takes turns back to back.
	for range 3 {
		if err := tr.take(ctx, roleWriter); err != nil {
			t.Fatal(err)
		}
		tr.give()
	}
	// A wait ends with its context, and the turn is still given.
	if err := tr.take(ctx, roleWriter); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := tr.take(cctx, roleCaller); err != context.DeadlineExceeded {
		t.Fatalf("a caller's wait past its deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	tr.give()
	if err := tr.take(ctx, roleCaller); err != nil {
		t.Fatal(err)
	}
	tr.give()
}
