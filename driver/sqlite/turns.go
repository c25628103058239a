package sqlite

import (
	"context"
	"sync"
)

// turns orders this process's two writing connections: the writer's
// (keel's group commits: claims, lease renewals, finishes) and the one
// DB() hands to callers (their transactions with EnqueueTx and
// CompleteTx). One writes at a time, and when both wait they alternate.
// With one connection for both, the writer waited in database/sql's pool
// among every handler wanting a transaction, taken in no order: behind
// twenty handlers' transactions a lease renewal could wait two seconds
// and live leases ran out. Now it waits for one at most.
type turns struct {
	mu      sync.Mutex
	held    bool
	last    role          // who had the last turn
	waiting [2]int        // by role
	wake    chan struct{} // closed when a turn ends
}

// role is a writing connection's side in turns.
type role int

const (
	roleWriter role = iota
	roleCaller
)

func newTurns() *turns { return &turns{wake: make(chan struct{})} }

// take waits for r's turn, or for ctx to end.
func (t *turns) take(ctx context.Context, r role) error {
	other := 1 - r
	t.mu.Lock()
	t.waiting[r]++
	for t.held || t.waiting[other] > 0 && t.last == r {
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			t.mu.Lock()
			t.waiting[r]--
			t.signal() // the other side may go now
			t.mu.Unlock()
			return ctx.Err()
		}
		t.mu.Lock()
	}
	t.waiting[r]--
	t.held, t.last = true, r
	t.mu.Unlock()
	return nil
}

// give ends the turn.
func (t *turns) give() {
	t.mu.Lock()
	t.held = false
	t.signal()
	t.mu.Unlock()
}

// signal wakes the waiters; t.mu is held.
func (t *turns) signal() {
	close(t.wake)
	t.wake = make(chan struct{})
}
