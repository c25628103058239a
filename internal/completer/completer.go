// Package completer finishes tasks in batches (group commit): every
// transition that arrives while one batch is being written goes into the
// next, so one statement finishes many tasks.
package completer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Request is one transition and the callback told whether it applied
// (false: the task's lease was lost, fencing rejected the write).
type Request struct {
	Transition driver.Transition
	Done       func(applied bool, err error)
}

// Config wires a Completer.
type Config struct {
	Driver   driver.Driver
	Owner    string
	Now      func() time.Time
	Logger   *slog.Logger
	MaxBatch int           // most transitions per write; default 1000
	Retry    time.Duration // wait between attempts when the database fails; default 100ms
	Attempts int           // database attempts per batch before giving up; default 20
}

// Completer batches transitions. Create with New, then Start and Stop.
type Completer struct {
	cfg    Config
	mu     sync.Mutex
	queue  []Request
	signal chan struct{}
	loop   *service.Loop
}

// New returns a Completer.
func New(cfg Config) *Completer {
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 1000
	}
	if cfg.Retry == 0 {
		cfg.Retry = 100 * time.Millisecond
	}
	if cfg.Attempts == 0 {
		cfg.Attempts = 20
	}
	return &Completer{cfg: cfg, signal: make(chan struct{}, 1)}
}

// Add queues a transition for the next batch.
func (c *Completer) Add(r Request) {
	c.mu.Lock()
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// Start runs the batching loop.
func (c *Completer) Start(ctx context.Context) {
	c.loop = service.Start(ctx, c.run)
}

// Stop writes what is queued and stops.
func (c *Completer) Stop() { c.loop.Stop() }

func (c *Completer) run(ctx context.Context) {
	for {
		select {
		case <-c.signal:
			c.flush(ctx)
		case <-ctx.Done():
			c.flush(ctx)
			return
		}
	}
}

// flush writes everything queued, in batches of at most MaxBatch.
func (c *Completer) flush(ctx context.Context) {
	for {
		c.mu.Lock()
		n := min(len(c.queue), c.cfg.MaxBatch)
		batch := c.queue[:n:n]
		c.queue = c.queue[n:]
		if len(c.queue) == 0 {
			c.queue = nil
		}
		c.mu.Unlock()
		if n == 0 {
			return
		}
		c.write(ctx, batch)
	}
}

func (c *Completer) write(ctx context.Context, batch []Request) {
	params := driver.FinishParams{Owner: c.cfg.Owner, Transitions: make([]driver.Transition, len(batch))}
	for i, r := range batch {
		params.Transitions[i] = r.Transition
	}
	// Writes must outlive a stopping worker: use a context that is not
	// cancelled with the loop, bounded by the attempts below.
	wctx := context.WithoutCancel(ctx)
	var err error
	for attempt := 1; attempt <= c.cfg.Attempts; attempt++ {
		params.Now = c.cfg.Now()
		var applied []int64
		applied, err = c.cfg.Driver.Finish(wctx, params)
		if err == nil {
			ok := make(map[int64]bool, len(applied))
			for _, id := range applied {
				ok[id] = true
			}
			for _, r := range batch {
				r.Done(ok[r.Transition.ID], nil)
			}
			return
		}
		c.cfg.Logger.Warn("keel: finishing tasks failed, will retry", "error", err, "tasks", len(batch), "attempt", attempt)
		time.Sleep(c.cfg.Retry)
	}
	// The tasks stay running; their leases expire and the rescuer retries them.
	for _, r := range batch {
		r.Done(false, err)
	}
}
