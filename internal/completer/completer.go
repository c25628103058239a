// Package completer finishes tasks in batches (group commit). It never
// waits for company: a transition that finds every writer idle is written
// at once, alone if nothing else is queued. What arrives while a write is
// under way is batched into the next write: one statement finishes many
// tasks under load, and the time from a handler's return to its committed
// outcome stays about one write long (keel_outcome_commit_seconds).
// Another writer joins in when a whole batch is waiting, or when the
// oldest transition has waited Overflow for a slow or hung write.
package completer

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// Finisher is what a Completer needs of a driver.
type Finisher interface {
	Finish(ctx context.Context, params driver.FinishParams) ([]int64, error)
}

// Request is one transition and the owner told whether it applied.
type Request struct {
	Transition driver.Transition
	Owner      Owner
}

// Owner is told how its request went. The engine's attempt is its own
// owner, so a request costs no closures.
type Owner interface {
	// LeaseExpiresAt returns until when this process's lease on the task
	// is known to hold; it is asked only when a write fails, which is then
	// retried, with backoff, until that time: a task whose outcome is
	// stored before its lease runs out is not run again. ok false: retried
	// for Config.Patience.
	LeaseExpiresAt() (t time.Time, ok bool)
	// Done says whether the transition applied (false: the task's lease
	// was lost, fencing rejected the write), or the error it was given up
	// with.
	Done(applied bool, err error)
}

// Config wires a Completer.
type Config struct {
	Driver Finisher
	Owner  string
	// Clock paces the retries and stamps each write; default Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// MaxBatch is the most transitions per write; default 1000.
	MaxBatch int
	// Writers is how many writes may run at once; default 4. While one
	// write is under way, another starts only for a whole batch
	// (MaxBatch) or for transitions that waited Overflow: each write is a
	// commit, and on PostgreSQL writing side by side as soon as anything
	// waited made four small commits where one would do (the drain of
	// 100,000 no-op tasks ran at 0.83 of the speed of one writer). (The
	// SQLite driver's single writer merges concurrent writes into one
	// transaction; the others commit them side by side.)
	Writers int
	// Overflow is how long a transition waits for a write in progress
	// before another writer takes it; default 20ms. Negative: it never
	// waits (a driver whose concurrent writes share one commit,
	// driver.GroupCommitter).
	Overflow time.Duration
	// Retry is the first wait after a failed write, doubled after each
	// further failure up to MaxRetry; default 100ms.
	Retry time.Duration
	// MaxRetry caps the wait between attempts; default 1s.
	MaxRetry time.Duration
	// Patience is how long a failing write is retried for a request with
	// no LeaseExpiresAt; default 2s.
	Patience time.Duration
}

// Completer batches transitions. Create with New, then Start and Stop.
type Completer struct {
	cfg    Config
	clk    service.Clock
	mu     sync.Mutex
	queue  []Request
	spare  []Request // an empty array for the queue (flush)
	since  time.Time // when the oldest queued request came (queue not empty)
	busy   int       // writes under way
	signal chan struct{}
	loop   *service.Loop
}

// New returns a Completer.
func New(cfg Config) *Completer {
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = 1000
	}
	if cfg.Writers <= 0 {
		cfg.Writers = 4
	}
	if cfg.Overflow == 0 {
		cfg.Overflow = 20 * time.Millisecond
	}
	if cfg.Retry == 0 {
		cfg.Retry = 100 * time.Millisecond
	}
	if cfg.MaxRetry == 0 {
		cfg.MaxRetry = time.Second
	}
	if cfg.Patience == 0 {
		cfg.Patience = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Completer{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now), signal: make(chan struct{}, 1)}
}

// Add queues a transition for the next batch.
func (c *Completer) Add(r Request) {
	c.mu.Lock()
	if c.queue == nil {
		c.queue, c.spare = c.spare, nil
	}
	if len(c.queue) == 0 {
		c.since = c.clk.Now()
	}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// Start runs the writers.
func (c *Completer) Start(ctx context.Context) {
	c.loop = service.Start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		for range c.cfg.Writers {
			wg.Go(func() { c.run(ctx) })
		}
		wg.Wait()
	})
}

// Stop writes what is queued and stops. While the database fails, it
// waits until the queued tasks' leases run out.
func (c *Completer) Stop() { c.loop.Stop() }

// run is one writer: it writes what is queued whenever it is free and
// may (see flush), and otherwise waits for a signal or until the queued
// transitions have waited Overflow.
func (c *Completer) run(ctx context.Context) {
	var timer <-chan time.Time
	for {
		select {
		case <-c.signal:
		case <-timer:
		case <-ctx.Done():
			c.flush(ctx, true)
			return
		}
		timer = nil
		if wait := c.flush(ctx, false); wait > 0 {
			timer = c.clk.After(wait)
		}
	}
}

// flush writes everything queued, in batches of at most MaxBatch, while
// it may: when no other write is under way, when a whole batch waits, when
// the oldest queued transition has waited Overflow, or when stopping.
// Otherwise it returns how long until the oldest will have waited
// Overflow (a write under way takes what is queued when it ends). Having
// taken a batch, it passes the signal on when more is queued, so that a
// free writer considers it at once rather than after this write. A batch
// that emptied the queue gives its array back as the spare for the next
// queue, so a busy completer does not grow a new queue for every batch.
func (c *Completer) flush(ctx context.Context, stopping bool) (wait time.Duration) {
	for {
		c.mu.Lock()
		if len(c.queue) > 0 && c.busy > 0 && len(c.queue) < c.cfg.MaxBatch && !stopping && c.cfg.Overflow > 0 {
			if waited := c.clk.Now().Sub(c.since); waited < c.cfg.Overflow {
				c.mu.Unlock()
				return c.cfg.Overflow - waited
			}
		}
		n := min(len(c.queue), c.cfg.MaxBatch)
		batch := c.queue[:n:n]
		c.queue = c.queue[n:]
		whole := len(c.queue) == 0
		if whole {
			c.queue = nil
		}
		if n > 0 {
			c.busy++
		}
		c.mu.Unlock()
		if n == 0 {
			return 0
		}
		if !whole {
			select {
			case c.signal <- struct{}{}:
			default:
			}
		}
		c.write(ctx, batch)
		c.mu.Lock()
		c.busy--
		if whole {
			clear(batch) // let the requests' owners go
			c.spare = batch[:0]
		}
		c.mu.Unlock()
	}
}

// write finishes batch, retrying a failed write with backoff. Each request
// is given up, with the error, once its deadline has passed: then its
// lease may be gone, the rescuer takes the task over, and the fencing of a
// late write would reject it anyway.
func (c *Completer) write(ctx context.Context, batch []Request) {
	// Writes must outlive a stopping worker: use a context that is not
	// cancelled with the loop, bounded by the requests' deadlines.
	wctx := context.WithoutCancel(ctx)
	var deadlines []time.Time // per request, set at the first failure
	wait := c.cfg.Retry
	for attempt := 1; ; attempt++ {
		params := driver.FinishParams{Owner: c.cfg.Owner, Now: c.clk.Now(), Transitions: make([]driver.Transition, len(batch))}
		for i, r := range batch {
			params.Transitions[i] = r.Transition
		}
		applied, err := c.cfg.Driver.Finish(wctx, params)
		if err == nil {
			ok := make(map[int64]bool, len(applied))
			for _, id := range applied {
				ok[id] = true
			}
			for _, r := range batch {
				r.Owner.Done(ok[r.Transition.ID], nil)
			}
			return
		}
		now := c.clk.Now()
		if deadlines == nil {
			deadlines = make([]time.Time, len(batch))
			for i, r := range batch {
				deadlines[i] = now.Add(c.cfg.Patience)
				if t, ok := r.Owner.LeaseExpiresAt(); ok {
					deadlines[i] = t
				}
			}
		}
		// Give up on the requests whose time is up; retry the others.
		keptR, keptD := batch[:0], deadlines[:0]
		var next time.Time
		for i, r := range batch {
			if !now.Before(deadlines[i]) {
				r.Owner.Done(false, err)
				continue
			}
			keptR, keptD = append(keptR, r), append(keptD, deadlines[i])
			if next.IsZero() || deadlines[i].Before(next) {
				next = deadlines[i]
			}
		}
		if gaveUp := len(batch) - len(keptR); gaveUp > 0 {
			c.cfg.Logger.Error("keel: finishing tasks failed until their leases ran out; giving up",
				"error", err, "tasks", gaveUp, "attempts", attempt)
		}
		batch, deadlines = keptR, keptD
		if len(batch) == 0 {
			return
		}
		sleep := min(wait, next.Sub(now)) // one last try as the first lease ends
		c.cfg.Logger.Warn("keel: finishing tasks failed, will retry", "error", err, "tasks", len(batch),
			"attempt", attempt, "retry_in", sleep)
		<-c.clk.After(sleep)
		wait = min(2*wait, c.cfg.MaxRetry)
	}
}
