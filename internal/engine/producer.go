package engine

import (
	"time"

	"github.com/keelq/keel/driver"
)

// producer claims tasks of one queue up to its concurrency and starts an
// execution for each.
type producer struct {
	e     *Engine
	name  string
	limit int
	// active counts handlers running; finishing counts attempts whose
	// handler returned but whose outcome is not stored yet. Both are guarded
	// by e.mu. A slot frees when the handler returns, so the next claim and
	// the previous completions share a group commit; finishing is bounded
	// by limit so a slow database pushes back on claiming.
	active    int
	finishing int
	wakeup    chan struct{}
	freed     chan struct{}
	stop      chan struct{}
	done      chan struct{}
	// timer wakes the worker when a task this process scheduled (a retry,
	// a snooze, a delayed enqueue, a rescue) becomes due.
	timer *dueTimer
}

func newProducer(e *Engine, name string, limit int) *producer {
	p := &producer{
		e: e, name: name, limit: limit,
		wakeup: make(chan struct{}, 1), freed: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	p.timer = newDueTimer(e.cfg.Now, p.wake)
	return p
}

// free is how many tasks the queue may claim now: none while too many
// handlers ignore their cancelled context (see Engine.Runaway).
func (p *producer) free() int {
	if p.e.runawayFull() {
		return 0
	}
	p.e.mu.Lock()
	defer p.e.mu.Unlock()
	limit := p.e.queueLimit(p.name, p.limit)
	return max(0, min(limit-p.active, 2*limit-p.active-p.finishing))
}

// run is the claim loop: claim while slots are free and the queue yields
// full batches, otherwise wait for a wake-up, a freed slot or the poll.
func (p *producer) run() {
	defer close(p.done)
	e := p.e
	batch := min(e.cfg.ClaimBatch, p.limit)
	// Claiming on every single freed slot makes tiny batches: wait until a
	// quarter of a batch is free, or briefly for more.
	threshold := max(1, batch/4)
	pollEvery := e.cfg.PollInterval
	if d, ok := e.cfg.QueuePoll[p.name]; ok {
		pollEvery = d
	}
	poll := time.NewTimer(0)
	defer poll.Stop()
	drained := false // the last claim found fewer tasks than it asked for
	fill := time.NewTimer(time.Hour)
	fill.Stop()
	defer fill.Stop()
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		if free := p.free(); free > 0 {
			got, asked, err := p.claim(min(free, batch))
			if err != nil {
				e.cfg.Logger.Warn("keel: claim failed", "queue", p.name, "error", err)
			}
			drained = got < asked
			if got == asked && asked > 0 {
				continue
			}
		}
		poll.Reset(pollEvery)
	wait:
		for {
			select {
			case <-p.stop:
				return
			case <-p.wakeup:
				drained = false
				break wait
			case <-poll.C:
				break wait
			case <-fill.C:
				break wait
			case <-p.freed:
				if drained {
					continue // nothing to claim until a wake-up or the poll
				}
				if p.free() >= threshold {
					break wait
				}
				fill.Reset(2 * time.Millisecond)
			}
		}
		poll.Stop()
		fill.Stop()
	}
}

// claim takes up to n tasks and starts them; it returns how many it got
// and how many it asked for (fewer than n under a type's concurrency cap).
func (p *producer) claim(n int) (got, asked int, err error) {
	e := p.e
	types, n := e.claimFilter(n)
	probes := e.claimProbes(p, types, n) // half-open brakes' probes (brake.go)
	if types, n = e.brakeFilter(types, n-probes); n == 0 {
		return probes, probes, nil
	}
	now := e.cfg.Now()
	rows, err := e.drv.Claim(e.workCtx, driver.ClaimParams{
		Queue: p.name, Limit: n, Owner: e.cfg.Node, Now: now, LeaseExpiresAt: now.Add(e.cfg.LeaseTTL),
		Types: types,
	})
	if err != nil {
		return 0, n, err
	}
	for i := range rows {
		e.applyTypeSettings(&rows[i])
		e.observeStart(&rows[i])
		e.startExecution(p, &rows[i])
	}
	return len(rows) + probes, n + probes, nil
}

// wakeAt makes the worker look for tasks at at.
func (p *producer) wakeAt(at time.Time) { p.timer.add(at) }

func (p *producer) wake() {
	select {
	case p.wakeup <- struct{}{}:
	default:
	}
}

func (p *producer) signalFreed() {
	select {
	case p.freed <- struct{}{}:
	default:
	}
}
