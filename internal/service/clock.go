package service

import "time"

// Clock is the time a service reads and waits on. Services take one so
// their tests can move time by hand (servicetest.Clock) instead of
// sleeping; production code uses Real.
type Clock interface {
	// Now is the current time.
	Now() time.Time
	// NewTicker returns a ticker that fires every d (d > 0), dropping
	// ticks a slow reader misses, as time.Ticker does.
	NewTicker(d time.Duration) Ticker
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Ticker is a Clock's periodic tick.
type Ticker interface {
	// C delivers the ticks.
	C() <-chan time.Time
	// Stop ends the ticks.
	Stop()
}

// Real returns the wall clock with real timers; now replaces time.Now as
// its reading when it is not nil (keel's Config.Now).
func Real(now func() time.Time) Clock {
	if now == nil {
		now = time.Now
	}
	return realClock{now: now}
}

// Or returns clk, or Real(now) when clk is nil: how a service picks its
// clock from a Config with both.
func Or(clk Clock, now func() time.Time) Clock {
	if clk != nil {
		return clk
	}
	return Real(now)
}

type realClock struct{ now func() time.Time }

func (c realClock) Now() time.Time                         { return c.now() }
func (c realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (c realClock) NewTicker(d time.Duration) Ticker       { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }
