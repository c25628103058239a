package sqlite

import (
	"context"
	"testing"
	"time"
)

// TestTurnsAlternate: while one side holds the turn and both wait, the
// side that did not have the last turn goes next; a side alone takes
// turn after turn; a wait ends with its context and lets the other go.
func TestTurnsAlternate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tr := newTurns()
	if err := tr.take(ctx, roleWriter); err != nil {
		t.Fatal(err)
	}
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
	// The writer holds the turn; a writer and a caller wait.
	waitFor(roleWriter)
	waitFor(roleCaller)
	for deadline := time.Now().Add(5 * time.Second); ; {
		tr.mu.Lock()
		n := tr.waiting[roleWriter] + tr.waiting[roleCaller]
		tr.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two waiters never waited")
		}
		time.Sleep(time.Millisecond)
	}
	tr.give()
	if r := <-got; r != roleCaller {
		t.Fatalf("after the writer's turn, with both waiting, %d went; want the caller", r)
	}
	tr.give()
	if r := <-got; r != roleWriter {
		t.Fatalf("after the caller's turn, %d went; want the writer", r)
	}
	tr.give()
	// Alone, a side takes turns back to back.
	for range 3 {
		if err := tr.take(ctx, roleCaller); err != nil {
			t.Fatal(err)
		}
		tr.give()
	}
	// A caller that gives up waiting lets the writer, waiting behind it
	// for alternation, go.
	if err := tr.take(ctx, roleWriter); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := tr.take(cctx, roleCaller); err != context.DeadlineExceeded {
		t.Fatalf("a caller's wait past its deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	tr.give()
	if err := tr.take(ctx, roleWriter); err != nil {
		t.Fatal(err)
	}
	tr.give()
}
