package engine

import (
	"slices"
	"sync"
	"time"
)

// maxDue bounds how many due times a dueTimer remembers; past it the
// latest are forgotten and found by the poll instead.
const maxDue = 4096

// dueTimer keeps every due time this process knows of for one queue (its
// own retries, snoozes, delayed enqueues and rescues) and keeps one timer
// armed for the earliest, so each of them wakes the worker when it is due
// rather than at the next poll.
type dueTimer struct {
	now  func() time.Time
	fire func()

	mu      sync.Mutex
	due     []time.Time // ascending
	timer   *time.Timer
	at      time.Time // when timer fires; zero when none is armed
	gen     int       // tells a superseded timer's callback to do nothing
	stopped bool
}

func newDueTimer(now func() time.Time, fire func()) *dueTimer {
	return &dueTimer{now: now, fire: fire}
}

// add remembers at and re-arms the timer when at is the earliest.
func (t *dueTimer) add(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	i, found := slices.BinarySearchFunc(t.due, at, time.Time.Compare)
	if found {
		return
	}
	if i == maxDue {
		return // later than everything remembered, with no room: the poll finds it
	}
	t.due = slices.Insert(t.due, i, at)
	if len(t.due) > maxDue {
		t.due = t.due[:maxDue]
	}
	t.arm()
}

// arm starts the timer for the earliest due time unless one is armed for
// that time or sooner. t.mu is held.
func (t *dueTimer) arm() {
	if len(t.due) == 0 {
		return
	}
	next := t.due[0]
	if !t.at.IsZero() && !next.Before(t.at) {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	t.gen++
	gen := t.gen
	t.at = next
	t.timer = time.AfterFunc(max(next.Sub(t.now()), 0), func() { t.fired(gen) })
}

func (t *dueTimer) fired(gen int) {
	t.mu.Lock()
	if gen != t.gen || t.stopped {
		t.mu.Unlock()
		return
	}
	now := t.now()
	n := 0
	for n < len(t.due) && !t.due[n].After(now) {
		n++
	}
	t.due = t.due[n:]
	t.timer, t.at = nil, time.Time{}
	t.arm()
	t.mu.Unlock()
	t.fire()
}

// stop disarms the timer for good.
func (t *dueTimer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	t.due = nil
}
