package sqlite

import (
	"context"
	"sync"
	"time"
)

// turns orders this process's two writing connections: the writer's
// (keel's group commits: claims, lease renewals, finishes) and the one
// DB() hands to callers (their transactions with EnqueueTx and
// CompleteTx). One writes at a time. A waiting caller goes before the
// writer, so that the writer's batches grow while callers are busy, until
// the writer has waited writerPatience: then the writer goes next. With
// one connection for both, the writer waited in database/sql's pool among
// every handler wanting a transaction, taken in no order: behind twenty
// handlers' transactions a lease renewal could wait a second and more,
// and live leases ran out. Now it waits writerPatience and one caller's
// transaction at most.
type turns struct {
	mu            sync.Mutex
	held          bool
	writerWaiting bool      // the writer waits (there is one writer goroutine)
	writerSince   time.Time // since when
	callers       int       // callers waiting
	wake          chan struct{}
	patience      time.Duration
}

// writerPatience is how long the writer lets waiting callers go first.
const writerPatience = 20 * time.Millisecond

// role is a writing connection's side in turns.
type role int

const (
	roleWriter role = iota
	roleCaller
)

func newTurns() *turns { return &turns{wake: make(chan struct{}), patience: writerPatience} }

// take waits for r's turn, or for ctx to end.
func (t *turns) take(ctx context.Context, r role) error {
	t.mu.Lock()
	if r == roleWriter {
		t.writerWaiting, t.writerSince = true, time.Now()
	} else {
		t.callers++
	}
	for {
		var wait time.Duration // > 0: the writer lets callers go for this long yet
		if !t.held {
			if r == roleCaller && !t.writerUrgent() {
				break
			}
			if r == roleWriter {
				if wait = t.patience - time.Since(t.writerSince); t.callers == 0 || wait <= 0 {
					break
				}
			}
		}
		wake := t.wake
		t.mu.Unlock()
		var timer <-chan time.Time
		var tm *time.Timer
		if wait > 0 {
			tm = time.NewTimer(wait)
			timer = tm.C
		}
		select {
		case <-wake:
		case <-timer:
		case <-ctx.Done():
			if tm != nil {
				tm.Stop()
			}
			t.mu.Lock()
			t.leaveQueue(r)
			t.signal() // the other side may go now
			t.mu.Unlock()
			return ctx.Err()
		}
		if tm != nil {
			tm.Stop()
		}
		t.mu.Lock()
	}
	t.leaveQueue(r)
	t.held = true
	t.mu.Unlock()
	return nil
}

// writerUrgent reports whether the writer has waited its patience out;
// t.mu is held.
func (t *turns) writerUrgent() bool {
	return t.writerWaiting && time.Since(t.writerSince) >= t.patience
}

// leaveQueue ends r's wait; t.mu is held.
func (t *turns) leaveQueue(r role) {
	if r == roleWriter {
		t.writerWaiting = false
	} else {
		t.callers--
	}
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
