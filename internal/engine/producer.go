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
	// prefetch is how many tasks the queue may hold claimed beyond its
	// slots, each started as soon as a slot frees (see prefetch.go); held
	// are those tasks, in claim order (guarded by e.mu).
	prefetch int
	held     []*execution
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

func newProducer(e *Engine, name string, limit, prefetch int) *producer {
	p := &producer{
		e: e, name: name, limit: limit, prefetch: max(prefetch, 0), skip: map[string]time.Time{},
		wakeup: make(chan struct{}, 1), freed: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	p.timer = newDueTimer(e.cfg.Now, p.wake)
	return p
}

// room is how many tasks the queue may claim now: slots to start at once,
// and ahead to hold for the slots that free next (prefetch). Nothing while
// too many handlers ignore their cancelled context (see Engine.Runaway).
// A held task occupies a slot here: it takes the next one that frees.
// Nothing is claimed ahead for a paused queue or one with a cluster-wide
// concurrency or rate (every task it starts must be claimed within the
// limit), nor while commits fall behind (see claimable).
func (p *producer) room() (slots, ahead int) {
	e := p.e
	if e.runawayFull() {
		return 0, 0
	}
	limited := e.queueLimited(p.name)
	e.mu.Lock()
	defer e.mu.Unlock()
	limit := e.queueLimit(p.name, p.limit)
	occupied := p.active + len(p.held)
	slots = claimable(limit, occupied, p.finishing)
	if p.prefetch > 0 && limit > 0 && !limited && p.finishing < (limit+1)/2 {
		ahead = max(0, p.prefetch-max(0, occupied-limit))
	}
	return slots, ahead
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
	batch := min(e.cfg.ClaimBatch, p.limit+p.prefetch)
	// Claiming on every single freed slot makes tiny batches: wait until a
	// quarter of a batch is free, or briefly for more. With prefetch, a
	// freed slot takes a held task and the room grows only as they run
	// out: claim once half of them started, so that the rest cover the
	// claim's round trip.
	threshold := max(1, batch/4)
	if p.prefetch > 0 {
		threshold = max(1, min(threshold, (p.prefetch+1)/2))
	}
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
		p.startHeld()
		if slots, ahead := p.room(); slots+ahead > 0 {
			slots = min(slots, batch)
			more, err := p.claim(slots, min(ahead, batch-slots))
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
				if slots, ahead := p.room(); slots+ahead >= threshold {
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
// cluster-wide limits, then the other types with what is left, and ahead
// more of those to hold for the next free slots (prefetch). more reports
// whether a claim got all it asked for, so more may be waiting.
func (p *producer) claim(n, ahead int) (more bool, err error) {
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
	if queueLimited {
		ahead = 0 // limited since room was measured
	}
	if types == nil || n+ahead <= 0 {
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
			Queue: p.name, Limit: n + ahead, Owner: e.cfg.Node, Now: now, LeaseExpiresAt: now.Add(e.cfg.LeaseTTL),
			Types: types,
		})
		err = cmp.Or(cerr, err)
		p.startOrHold(rows, n)
	}
	return more || (len(rows) == n+ahead && n+ahead > 0), err
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
func (p *producer) start(rows []driver.TaskRow) { p.startOrHold(rows, len(rows)) }

// startOrHold starts an execution for each of the first n claimed rows and
// holds the others, in their claim order, for the next free slots.
func (p *producer) startOrHold(rows []driver.TaskRow, n int) {
	for i := range rows {
		p.e.applyTypeSettings(&rows[i])
		if i < n {
			p.e.startExecution(p, &rows[i])
		} else {
			p.e.admit(p, &rows[i], true)
		}
	}
	if len(rows) > n {
		p.startHeld() // a slot may have freed during the claim
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
