// Package service gives keel's background services one lifecycle: Start
// runs a loop in a goroutine, Stop cancels it and waits for it to return.
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

// Start runs fn in a goroutine with a context that Stop cancels.
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

// Every calls fn now and then every interval until ctx ends.
func Every(ctx context.Context, interval time.Duration, fn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fn(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
