// Package servicetest has what tests of keel's background services share:
// a Clock whose time moves only when the test says so.
package servicetest

import (
	"sync"
	"testing"
	"time"

	"github.com/keelq/keel/internal/service"
)

// Clock is a service.Clock for tests. Its time stands still until Advance
// moves it; Advance fires the tickers and After channels that come due,
// so a service's loop runs a tick without any real time passing.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*waiter
	changed chan struct{} // closed and replaced whenever waiters changes
}

// waiter is one ticker (period > 0) or one After channel (period 0).
type waiter struct {
	at     time.Time
	period time.Duration
	ch     chan time.Time
}

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives once Advance has moved the clock
// d on; at once when d <= 0.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.add(&waiter{at: c.now.Add(d), ch: ch})
	return ch
}

// NewTicker returns a ticker that fires each time Advance moves the clock
// past a multiple of d from now. Like time.Ticker it holds one tick and
// drops the ones a slow reader misses.
func (c *Clock) NewTicker(d time.Duration) service.Ticker {
	if d <= 0 {
		panic("servicetest: non-positive ticker interval")
	}
	w := &waiter{period: d, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	w.at = c.now.Add(d)
	c.add(w)
	return &ticker{c: c, w: w}
}

type ticker struct {
	c *Clock
	w *waiter
}

func (t *ticker) C() <-chan time.Time { return t.w.ch }
func (t *ticker) Stop()               { t.c.remove(t.w) }

// Advance moves the clock d on and fires every waiter that came due; a
// ticker fires once however many of its periods d spans.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	fired := false
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		select {
		case w.ch <- w.at:
		default: // a ticker whose last tick is unread: drop this one
		}
		if w.period == 0 {
			fired = true
			continue
		}
		for !w.at.After(c.now) {
			w.at = w.at.Add(w.period)
		}
		kept = append(kept, w)
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
	if fired {
		c.notify()
	}
}

// AdvanceToNext waits until the clock holds a waiter, moves the clock to
// the earliest due time and fires what came due; it returns how far the
// clock moved. It fails tb if no waiter comes within 10 s.
func (c *Clock) AdvanceToNext(tb testing.TB) time.Duration {
	tb.Helper()
	c.WaitForWaiters(tb, 1)
	c.mu.Lock()
	next := c.waiters[0].at
	for _, w := range c.waiters[1:] {
		if w.at.Before(next) {
			next = w.at
		}
	}
	d := next.Sub(c.now)
	c.mu.Unlock()
	c.Advance(d)
	return d
}

// Waiters returns how many tickers and pending After channels the clock
// holds.
func (c *Clock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// WaitForWaiters blocks until the clock holds at least n tickers and
// pending After channels: the service under test is then waiting on it,
// and Advance will wake it. It fails tb after 10 s.
func (c *Clock) WaitForWaiters(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		have, changed := len(c.waiters), c.changed
		c.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			tb.Fatalf("servicetest: %d clock waiters after 10s, want %d", have, n)
		}
	}
}

func (c *Clock) add(w *waiter) {
	c.waiters = append(c.waiters, w)
	c.notify()
}

func (c *Clock) remove(w *waiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range c.waiters {
		if x == w {
			c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
			c.notify()
			return
		}
	}
}

// notify wakes WaitForWaiters; c.mu is held.
func (c *Clock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}
