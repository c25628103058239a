// Package brake holds the automatic brake's judgement of one task type on
// one node: which outcomes are evidence against the type's downstream, the
// window of the latest evidence, and what a half-open brake's trickle of
// probes does. The judgement stores nothing and knows no clock or
// database: the engine feeds it outcomes and writes the changes it asks
// for. Admin (admin.go) is the API's calls on the stored brakes.
//
// The brake judges tasks, not attempts. A task gives at most two pieces
// of evidence in its life: the failure of its first attempt (when the
// failure blames the downstream) and its success. A task that keeps
// failing adds nothing more, so a few poison tasks retried to their
// maximum count once each; a downstream that fails every task still shows
// at once, because every fresh task brings its first failure. Outcomes
// that blame the task (a permanent error, which an HTTP target's 4xx
// other than 408 and 429 is, or a panic) or keel (an expired lease, a
// release at stop, a snooze, a cancel) are no evidence.
package brake

import (
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// Evidence is what one finished attempt says of its type's downstream.
type Evidence int8

// The kinds of evidence.
const (
	// None: the attempt says nothing of the downstream.
	None Evidence = iota
	// Failure: the task's first attempt failed, and the failure blames
	// the downstream (an error or a timeout).
	Failure
	// Success: the task succeeded.
	Success
)

// Outcome is how an attempt ended, as the brake needs it.
type Outcome struct {
	// Succeeded: the task succeeded.
	Succeeded bool
	// Failed is the attempt's recorded outcome when it failed ("" when it
	// did not: a success, a release, a snooze).
	Failed driver.Outcome
	// Attempt is the attempt's number (1 for the task's first).
	Attempt int
}

// Blames reports whether a failed attempt blames the downstream: an error
// or a timeout. A permanent error, a panic, an expired lease, a snooze
// past its maximum and a cancel do not.
func (o Outcome) Blames() bool {
	return o.Failed == driver.OutcomeError || o.Failed == driver.OutcomeTimeout
}

// Of is the evidence an attempt gives.
func Of(o Outcome) Evidence {
	switch {
	case o.Succeeded:
		return Success
	case o.Blames() && o.Attempt <= 1:
		return Failure
	}
	return None
}

// Config is a type's brake thresholds: the brake opens when, of the last
// Window pieces of evidence, the failed share reaches Threshold.
type Config struct {
	Window    int
	Threshold float64
	// Cooldown: a half-open brake whose probes failed for this long
	// since the last success reopens.
	Cooldown time.Duration
}

// Window holds a type's latest pieces of evidence, at most its size: the
// oldest falls out as a new one comes in.
type Window struct {
	ring   []bool // true: a failure
	next   int    // where the next piece goes
	n      int    // pieces held
	failed int    // failures among them
}

// NewWindow returns an empty window of size pieces (at least 1).
func NewWindow(size int) *Window {
	return &Window{ring: make([]bool, max(size, 1))}
}

// Size is how many pieces the window holds when full.
func (w *Window) Size() int { return len(w.ring) }

// Add puts one piece of evidence in the window.
func (w *Window) Add(failed bool) {
	if w.n == len(w.ring) {
		if w.ring[w.next] {
			w.failed--
		}
	} else {
		w.n++
	}
	w.ring[w.next] = failed
	if failed {
		w.failed++
	}
	w.next = (w.next + 1) % len(w.ring)
}

// Counts returns the failures and the pieces held.
func (w *Window) Counts() (failed, n int) { return w.failed, w.n }

// Full reports whether the window holds its size.
func (w *Window) Full() bool { return w.n == len(w.ring) }

// Share is the failed share of the pieces held (0 when empty).
func (w *Window) Share() float64 {
	if w.n == 0 {
		return 0
	}
	return float64(w.failed) / float64(w.n)
}

// Reset empties the window.
func (w *Window) Reset() {
	clear(w.ring)
	w.next, w.n, w.failed = 0, 0, 0
}

// Resize changes the window's size, keeping its newest pieces.
func (w *Window) Resize(size int) {
	size = max(size, 1)
	if size == len(w.ring) {
		return
	}
	newest := make([]bool, 0, w.n)
	for i := w.n; i > 0; i-- {
		newest = append(newest, w.ring[(w.next-i+len(w.ring))%len(w.ring)])
	}
	*w = *NewWindow(size)
	for _, f := range newest[max(len(newest)-size, 0):] {
		w.Add(f)
	}
}

// Action is what the judgement asks the engine to write.
type Action int8

// The actions.
const (
	Keep   Action = iota // no change
	Open                 // a closed brake opens
	Reopen               // a half-open brake opens again
	Close                // a half-open brake closes
)

// Type is one type's judgement on one node.
type Type struct {
	cfg    Config
	window *Window
	// The half-open trickle: how many probes may run at once, how many
	// run, and how many succeeded since the brake half-opened; fresh
	// reports whether one of them was a task's first attempt.
	width, running, successes int
	fresh                     bool
	// credits are how many tasks never tried may still start as probes:
	// each success earns three. Due retries need none: they add no evidence
	// when they fail again, whereas a burst of fresh tasks would fill the
	// window with first failures while the retries' successes lag.
	credits int
	// streak counts the probes that failed since the last success.
	streak      int
	lastSuccess time.Time
}

// SuccessMemory is how many cooldowns a probe's success keeps a half-open
// brake from reopening on failures.
const SuccessMemory = 3

// InitialWidth is how many probes a half-open brake first lets run at
// once on a node; each success lets one more run.
const InitialWidth = 2

// NewType returns the judgement of a type with cfg.
func NewType(cfg Config) *Type {
	return &Type{cfg: cfg, window: NewWindow(cfg.Window), width: InitialWidth}
}

// SetConfig applies changed thresholds, keeping the newest evidence.
func (t *Type) SetConfig(cfg Config) {
	t.cfg = cfg
	t.window.Resize(cfg.Window)
}

// Config returns the thresholds in force.
func (t *Type) Config() Config { return t.cfg }

// Window returns the type's window.
func (t *Type) Window() *Window { return t.window }

// Closed judges an attempt that ended while the brake was closed (or that
// began before it opened): its evidence goes in the window, and a full
// window whose failed share reaches the threshold opens the brake.
func (t *Type) Closed(e Evidence) Action {
	if e == None {
		return Keep
	}
	t.window.Add(e == Failure)
	if t.window.Full() && t.window.Share() >= t.cfg.Threshold {
		return Open
	}
	return Keep
}

// Failing reports whether the window still judges the type failing: it is
// empty (nothing says the downstream recovered) or its failed share
// reaches the threshold.
func (t *Type) Failing() bool {
	_, n := t.window.Counts()
	return n == 0 || t.window.Share() >= t.cfg.Threshold
}

// HalfOpened starts a new trickle: the brake just half-opened. The time of
// the last success is kept: probes that succeeded just before a
// reopening still count as the downstream answering.
func (t *Type) HalfOpened() {
	t.width, t.running, t.successes, t.fresh, t.credits, t.streak = InitialWidth, 0, 0, false, InitialWidth, 0
}

// Room is how many more probes may start now: due retries, and of tasks
// never tried at most FreshRoom.
func (t *Type) Room() int { return max(t.width-t.running, 0) }

// Succeeded reports whether a probe succeeded since the brake half-opened.
func (t *Type) Succeeded() bool { return t.successes > 0 }

// FreshRoom is how many tasks never tried may start now as probes: no
// more than the successes earned (credits); but one when no probe runs at
// all and scout is set (the engine sets it when no probe started for a
// cooldown and none succeeded yet, or for ten cooldowns: no retry came
// due), so that the type always makes progress.
func (t *Type) FreshRoom(scout bool) int {
	n := max(min(t.Room(), t.credits), 0)
	if n == 0 && t.running == 0 && scout {
		n = 1
	}
	return n
}

// ProbeStarted counts a started probe; fresh: a task never tried.
func (t *Type) ProbeStarted(fresh bool) {
	t.running++
	if fresh {
		t.credits = max(t.credits-1, 0)
	}
}

// Probe judges a probe's outcome while the brake is half open:
//   - a success goes in the window, widens the trickle by one and earns
//     three tasks never tried a place in it (due retries need none); once
//     a task's first attempt has succeeded and the window's failed share
//     is below half the threshold, the brake closes: the successes
//     outweigh the failures that opened it, and fresh tasks, which a
//     closed brake lets through first, succeed again. While only retries
//     succeed (a downstream that refuses every task's first attempts) the
//     brake stays half open and the trickle keeps widening, due retries
//     first;
//   - a failure that blames the downstream (a task's first failure goes
//     in the window too) reopens the brake when no probe succeeded for
//     SuccessMemory cooldowns (on this node, across reopenings: retries
//     that succeed come back in waves, a backoff apart) and the probes failed in
//     a row: the first 2 of this half-open, or as many as the trickle is
//     wide once some succeeded. The probes found the downstream still
//     down. Between successes, failures are expected: retries of tasks
//     that will succeed, and fresh tasks' first failures;
//   - any other end (a cancel, a release, an expired lease) frees the
//     probe's place for another.
func (t *Type) Probe(o Outcome, now time.Time) Action {
	t.running = max(t.running-1, 0)
	switch e := Of(o); {
	case e == Success:
		t.window.Add(false)
		t.successes++
		t.width++
		t.credits += 3
		t.streak = 0
		t.lastSuccess = now
		t.fresh = t.fresh || o.Attempt <= 1
		if t.fresh && t.window.Share() < t.cfg.Threshold/2 {
			return Close
		}
	case o.Blames():
		if e == Failure {
			t.window.Add(true)
		}
		t.streak++
		recent := !t.lastSuccess.IsZero() && now.Sub(t.lastSuccess) < SuccessMemory*t.cfg.Cooldown
		if !recent && t.streak >= InitialWidth && (t.successes == 0 || t.streak >= t.width) {
			return Reopen
		}
	}
	return Keep
}

// Closed by someone else (an operator, another node): the window starts
// afresh unless it already judges the type healthy.
func (t *Type) ClosedElsewhere() {
	if t.Failing() {
		t.window.Reset()
	}
	t.HalfOpened()
}

// Reason says why the brake opened, for the stored row.
func (t *Type) Reason(cooldown fmt.Stringer) string {
	failed, n := t.window.Counts()
	return fmt.Sprintf("%d of the last %d tasks judged failed their first attempt (%d succeeded; threshold %.0f%%): paused for %v",
		failed, n, n-failed, 100*t.cfg.Threshold, cooldown)
}
