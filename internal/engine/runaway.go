package engine

import (
	"time"

	"github.com/keelq/keel/driver"
)

// A runaway is a handler that kept running TimeoutGrace after its context
// ended (timeout, stop, lost lease, cancel). Its attempt is recorded and
// its slot reused, but its goroutine lives on until the handler returns:
// the engine counts such goroutines and stops claiming while
// MaxRunaway of them are alive, so a handler that ignores its context
// cannot make the process run unbounded work.

// Runaway returns how many handlers of this process ignored their ended
// context and are still running.
func (e *Engine) Runaway() int {
	if e == nil {
		return 0
	}
	return int(e.runaway.Load())
}

func (e *Engine) runawayFull() bool {
	return e.cfg.MaxRunaway > 0 && int(e.runaway.Load()) >= e.cfg.MaxRunaway
}

func (e *Engine) runawayStarted(row *driver.TaskRow, cause error) {
	n := e.runaway.Add(1)
	e.cfg.Logger.Error("keel: handler ignores its cancelled context and keeps running",
		"task_id", row.ID, "type", row.Type, "attempt", row.Attempt, "cause", cause,
		"runaway", n, "max_runaway", e.cfg.MaxRunaway)
	if e.cfg.MaxRunaway > 0 && int(n) == e.cfg.MaxRunaway {
		e.cfg.Logger.Error("keel: claims paused until runaway handlers return", "runaway", n, "node", e.cfg.Node)
	}
}

func (e *Engine) runawayEnded(row *driver.TaskRow, start time.Time) {
	n := e.runaway.Add(-1)
	e.cfg.Logger.Warn("keel: runaway handler returned", "task_id", row.ID, "type", row.Type,
		"attempt", row.Attempt, "ran", e.cfg.Now().Sub(start), "runaway", n)
	e.mu.Lock()
	for _, p := range e.queues {
		p.signalFreed()
	}
	e.mu.Unlock()
	e.WakeQueue("")
}
