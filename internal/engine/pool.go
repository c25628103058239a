package engine

import (
	"context"
	"time"
)

// Attempts run on long-lived goroutines. A goroutine per attempt paid for
// its start, its exit and for growing its stack again on every task; a
// goroutine that ran one attempt now waits for the next, and leaves after
// poolIdle without one or when the engine stops.

// poolIdle is how long an idle attempt goroutine waits for work.
const poolIdle = 10 * time.Second

// job is one attempt to run.
type job struct {
	p   *producer
	ctx context.Context
	ex  *execution
}

// pool hands attempts to idle goroutines.
type pool struct {
	work chan job      // unbuffered: a send succeeds only into an idle goroutine
	quit chan struct{} // closed by Stop: idle goroutines leave
}

func newPool() pool { return pool{work: make(chan job), quit: make(chan struct{})} }

// run runs j on an idle goroutine, or on a new one when none is idle.
func (e *Engine) run(j job) {
	select {
	case e.pool.work <- j:
	default:
		go e.attempts(j)
	}
}

// attempts runs j, then the attempts handed to it, until it idles for
// poolIdle or the engine stops.
func (e *Engine) attempts(j job) {
	idle := time.NewTimer(poolIdle)
	defer idle.Stop()
	for {
		e.execute(j.p, j.ctx, j.ex)
		j = job{} // the attempt's memory is not held while waiting
		idle.Reset(poolIdle)
		select {
		case j = <-e.pool.work:
		case <-idle.C:
			return
		case <-e.pool.quit:
			return
		}
	}
}
