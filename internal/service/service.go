// Package service gives keel's background services one lifecycle: Start
// runs a loop in a goroutine, Stop cancels it and waits for it to return.
// Services read and wait on a Clock, so tests drive them without sleeping.
package service

import (
	"context"
	"sync"
	"time"
)

// Loop is a running background loop.
type Loop struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Start runs fn in a goroutine with a context that Stop cancels. The
// context keeps ctx's values but not its cancellation: only Stop ends fn.
func Start(ctx context.Context, fn func(ctx context.Context)) *Loop {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Loop{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		fn(ctx)
	}()
	return l
}

// Stop cancels the loop and waits for it to return. It is safe to call
// more than once and on a nil Loop.
func (l *Loop) Stop() {
	if l == nil {
		return
	}
	l.once.Do(l.cancel)
	<-l.done
}

// Every calls fn now and then every interval until ctx ends, on the real
// clock.
func Every(ctx context.Context, interval time.Duration, fn func(ctx context.Context)) {
	EveryOn(ctx, Real(nil), interval, fn)
}

// EveryOn calls fn now and then at every tick of clk's ticker of interval
// until ctx ends. A call that outlasts interval makes the ticks it missed
// collapse into one, as with time.Ticker.
func EveryOn(ctx context.Context, clk Clock, interval time.Duration, fn func(ctx context.Context)) {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}
