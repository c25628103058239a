package engine

import (
	"cmp"
	"errors"
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
	// (claimable) so a slow database pushes back on claiming.
	active    int
	finishing int
	wakeup    chan struct{}
	freed     chan struct{}
	stop      chan struct{}
	done      chan struct{}
	// timer wakes the worker when a task this process scheduled (a retry,
	// a snooze, a delayed enqueue, a rescue) becomes due.
	timer *dueTimer
	// skip holds the limited types not to claim until the real time given
	// (a rate's next token), or, for a zero time, until the next wake-up
	// or poll (at its concurrency, or nothing ready). Only run uses it.
	skip map[string]time.Time
}

func newProducer(e *Engine, name string, limit int) *producer {
	p := &producer{
		e: e, name: name, limit: limit, skip: map[string]time.Time{},
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
	return claimable(p.e.queueLimit(p.name, p.limit), p.active, p.finishing)
}

// claimable is how many tasks a queue of limit slots may claim with active
// handlers running and finishing outcomes waiting for their commit. A slot
// frees when its handler returns, so the next claim and the previous
// outcomes share a commit; but the outcomes waiting are bounded by half the
// limit (rounded up) more than the slots left, so that claiming stops while commits fall
// behind. Outcomes waiting longer are the window in which a kill delivers
// a task again (keel_outcome_commit_seconds). With twice the limit, keel
// bench's drain (1,000 workers) had a p99 of 55 ms from a handler's return
// to its commit on MariaDB; with one and a half, 47 ms, at the same rate.
func claimable(limit, active, finishing int) int {
	return max(0, min(limit-active, limit+(limit+1)/2-active-finishing))
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
	pollEvery := p.pollEvery()
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
			more, err := p.claim(min(free, batch))
			if err != nil {
				e.cfg.Logger.Warn("keel: claim failed", "queue", p.name, "error", err)
				if errors.Is(err, driver.ErrUnavailable) {
					more = p.readBack()
				}
			}
			drained = !more
			if more {
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
				clear(p.skip)
				break wait
			case <-poll.C:
				clear(p.skip)
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

// claim takes up to n tasks and starts them: first the limited types
// (see claimFilter), each through Driver.ClaimLimited, which stops at their
// cluster-wide limits, then the other types with what is left. more
// reports whether a claim got all it asked for, so more may be waiting.
func (p *producer) claim(n int) (more bool, err error) {
	e := p.e
	types, limited := e.claimFilter(n)
	if e.anyBraked() {
		// Half-open brakes' probes first, then no braked type (brake.go).
		if probes := e.claimProbes(p, append(limitedNames(limited), types...), n); probes > 0 {
			n, more = n-probes, true
		}
		types, limited = e.brakeFilter(types), e.brakeFilterLimited(limited)
	}
	queueLimited := e.queueLimited(p.name)
	nowReal := time.Now()
	for _, lt := range limited {
		if n <= 0 {
			break
		}
		if until, ok := p.skip[lt.name]; ok && (until.IsZero() || nowReal.Before(until)) {
			continue
		}
		limits := []driver.Limit{{Kind: driver.SettingType, Name: lt.name}}
		if queueLimited {
			limits = append(limits, driver.Limit{Kind: driver.SettingQueue, Name: p.name})
		}
		ask := min(n, lt.room)
		res, cerr := p.claimLimited(ask, lt.name, []string{lt.name}, limits)
		if cerr != nil {
			err = cerr
			continue
		}
		n -= len(res.Rows)
		switch {
		case len(res.Rows) == ask:
			more = true
		case res.TokenIn > 0:
			// waiting for the token (claimLimited)
		default:
			// Full, or nothing left: until a wake-up (a finish of a
			// capped type wakes every queue) or the poll.
			p.skip[lt.name] = time.Time{}
		}
	}
	if types == nil || n <= 0 {
		return more, err
	}
	var rows []driver.TaskRow
	if queueLimited {
		res, cerr := p.claimLimited(n, "", types, []driver.Limit{{Kind: driver.SettingQueue, Name: p.name}})
		rows, err = res.Rows, cmp.Or(cerr, err)
	} else {
		now := e.cfg.Now()
		var cerr error
		rows, cerr = e.drv.Claim(e.workCtx, driver.ClaimParams{
			Queue: p.name, Limit: n, Owner: e.cfg.Node, Now: now, LeaseExpiresAt: now.Add(e.cfg.LeaseTTL),
			Types: types,
		})
		err = cmp.Or(cerr, err)
		p.start(rows)
	}
	return more || (len(rows) == n && n > 0), err
}

// claimLimited claims up to n tasks of types within limits and starts them.
//
// A rate limit short of tokens has the worker skip the limited type lt
// (for "", nothing) until the next token and wake it then.
func (p *producer) claimLimited(n int, lt string, types []string, limits []driver.Limit) (driver.LimitedClaim, error) {
	e := p.e
	now, wall := e.cfg.Now(), time.Now()
	res, err := e.drv.ClaimLimited(e.workCtx, driver.LimitedClaimParams{
		ClaimParams: driver.ClaimParams{Queue: p.name, Limit: n, Owner: e.cfg.Node, Now: now,
			LeaseExpiresAt: now.Add(e.cfg.LeaseTTL), Types: types},
		Limits: limits,
	})
	if err != nil {
		return res, err
	}
	p.start(res.Rows)
	if res.TokenIn > 0 {
		// From before the claim: rather early (a claim that finds no token
		// yet learns the rest of the wait) than late.
		p.waitToken(lt, wall.Add(res.TokenIn))
	}
	return res, nil
}

// readBack runs after a claim failed with the database unreachable. Its
// outcome is unknown: a connection that broke at or after COMMIT may have
// left tasks marked running under this node that the claim never
// returned, and without this they would wait for their lease to run out
// and the rescuer. It reads back the queue's tasks running under this
// node with a live lease (Driver.Claimed) and starts those no execution
// here holds at that fence. While the database stays unreachable it tries
// again with backoff until such a lease would have run out (then the
// rescuer takes the tasks back) or the worker stops. started reports
// whether it started any.
func (p *producer) readBack() (started bool) {
	e := p.e
	giveUp := time.Now().Add(e.cfg.LeaseTTL)
	wait := readBackRetry
	for {
		rows, err := e.drv.Claimed(e.workCtx, driver.ClaimedParams{Queue: p.name, Owner: e.cfg.Node, Now: e.cfg.Now(), Limit: maxReadBack})
		if err == nil {
			rows = e.unheld(rows)
			if len(rows) > 0 {
				e.cfg.Logger.Info("keel: a claim whose outcome was unknown had taken tasks; starting them",
					"queue", p.name, "tasks", len(rows))
				p.start(rows)
			}
			return len(rows) > 0
		}
		if e.workCtx.Err() != nil || !time.Now().Add(wait).Before(giveUp) {
			e.cfg.Logger.Warn("keel: could not read back what a failed claim took; its tasks, if any, are rescued when their lease runs out",
				"queue", p.name, "error", err)
			return false
		}
		select {
		case <-p.stop:
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// readBackRetry is the first wait before reading back a claim again;
// maxReadBack bounds the tasks one read-back returns.
const (
	readBackRetry = 50 * time.Millisecond
	maxReadBack   = 1000
)

// unheld returns the rows no execution of this engine holds at their
// fence.
func (e *Engine) unheld(rows []driver.TaskRow) []driver.TaskRow {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := rows[:0]
	for _, r := range rows {
		if ex, ok := e.running[r.ID]; !ok || ex.row.Fence != r.Fence {
			out = append(out, r)
		}
	}
	return out
}

// start starts an execution for each claimed row.
func (p *producer) start(rows []driver.TaskRow) {
	for i := range rows {
		p.e.applyTypeSettings(&rows[i])
		p.e.observeStart(&rows[i])
		p.e.startExecution(p, &rows[i])
	}
}

// waitToken skips the limited type name (or, for "", nothing: a limited
// queue's next claim finds its tokens) until at, a real time no later than
// the poll, and wakes the worker then.
func (p *producer) waitToken(name string, at time.Time) {
	wait := min(max(time.Until(at), time.Millisecond), p.pollEvery())
	if name != "" {
		p.skip[name] = time.Now().Add(wait)
	}
	time.AfterFunc(wait, p.wake)
}

// pollEvery is the queue's poll interval.
func (p *producer) pollEvery() time.Duration {
	if d, ok := p.e.cfg.QueuePoll[p.name]; ok {
		return d
	}
	return p.e.cfg.PollInterval
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
