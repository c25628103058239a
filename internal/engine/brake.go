package engine

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/brake"
	"github.com/keelq/keel/internal/shorten"
)

// The automatic brake (see driver.BrakeRow and package brake, which holds
// the judgement). Every node judges the attempts it runs: each type's
// window of evidence (a task's first failure, a task's success) lives in
// the node's memory, and the node whose window reaches the threshold opens
// the brake for the whole cluster at once, in the same step as the
// attempt that tipped it. Every node keeps a snapshot of the brakes not
// closed, read every SettingsInterval and at once after a change of its
// own: a claim leaves out the types whose brake is open, and lets a
// half-open brake's trickle of probes through (claimProbes): due retries
// first, then the oldest tasks. The node that sees a probe's outcome
// widens the trickle, reopens or closes the brake. The leader turns an
// open brake half open once its cooldown is over.

// brakes is the node's brake state.
type brakes struct {
	mu sync.Mutex
	// rows are the stored brakes that are not closed, as last read or
	// written here.
	rows map[string]driver.BrakeRow
	// configs are the types' thresholds: declared over the defaults,
	// with the runtime settings over them (read every SettingsInterval).
	configs map[string]driver.BrakeConfig
	// judges are the types' judgements on this node.
	judges map[string]*brake.Type
	// probes are the running probes: task id to type.
	probes map[int64]string
	// writing holds the types whose change is being written, so that
	// attempts ending together write it once.
	writing map[string]bool
	// seq counts the changes this node wrote; wrote is, per type, the
	// count when its last change was written. A read of the brakes that
	// began before a write ended may predate it, and must not undo it.
	seq   uint64
	wrote map[string]uint64
	// lastProbe is when a probe of the type last started, or its brake
	// half-opened: a half-open brake whose trickle found no due retry for
	// a cooldown sends a task never tried (brake.Type.FreshRoom).
	lastProbe map[string]time.Time
	// retryDue is, per half-open type, the earliest a due retry is known
	// to be waiting: after a claim of due retries found none, the trickle
	// does not ask again before the next retry this node scheduled comes
	// due, or a settings interval (retries scheduled elsewhere).
	retryDue map[string]time.Time
}

// braker returns the driver's brake storage, or nil.
func (e *Engine) braker() driver.Braker {
	b, _ := e.drv.(driver.Braker)
	return b
}

// loadBrakes reads the brakes and the types' thresholds and reports
// whether the set of braked types or their states changed.
func (e *Engine) loadBrakes(ctx context.Context) bool {
	b := e.braker()
	if b == nil {
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, max(e.cfg.SettingsInterval, time.Second))
	defer cancel()
	e.brakes.mu.Lock()
	readAt := e.brakes.seq
	e.brakes.mu.Unlock()
	rows, err := b.ListBrakes(lctx)
	var declared []driver.TypeDefaults
	if err == nil {
		declared, err = e.drv.ListTypes(lctx, nil)
	}
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("keel: reading brakes failed", "error", err)
		}
		return false
	}
	configs := map[string]driver.BrakeConfig{}
	for _, d := range declared {
		configs[d.Name] = overlay(e.cfg.BrakeDefaults, d.Brake)
	}
	next := map[string]driver.BrakeRow{}
	for _, r := range rows {
		c, ok := configs[r.Type]
		if !ok {
			c = e.cfg.BrakeDefaults
		}
		configs[r.Type] = overlay(c, r.Config)
		if r.State != driver.BrakeClosed {
			next[r.Type] = r
		}
	}
	e.brakes.mu.Lock()
	defer e.brakes.mu.Unlock()
	e.brakes.configs = configs
	for t, j := range e.brakes.judges {
		if c := e.brakeConfigLocked(t); c.Window != j.Config().Window || c.Threshold != j.Config().Threshold || c.Cooldown != j.Config().Cooldown {
			j.SetConfig(brake.Config{Window: max(c.Window, 1), Threshold: c.Threshold, Cooldown: c.Cooldown})
		}
	}
	var mine []string
	for t := range e.brakes.writing {
		mine = append(mine, t)
	}
	for t, at := range e.brakes.wrote {
		if at > readAt {
			mine = append(mine, t)
		}
	}
	for _, t := range mine {
		// A change this node is writing, or wrote while the brakes were
		// read: what was read may be from before it, and the write set
		// the snapshot when it committed.
		if o, ok := e.brakes.rows[t]; ok {
			next[t] = o
		} else {
			delete(next, t)
		}
	}
	changed := len(next) != len(e.brakes.rows)
	for t, o := range e.brakes.rows {
		r, ok := next[t]
		changed = changed || !ok || o.State != r.State
		if !ok {
			// Closed elsewhere (by hand, or by another node's probes).
			if j := e.brakes.judges[t]; j != nil {
				j.ClosedElsewhere()
			}
		} else if o.State != driver.BrakeHalfOpen && r.State == driver.BrakeHalfOpen {
			if j := e.brakes.judges[t]; j != nil {
				j.HalfOpened()
			}
			e.markProbeLocked(t)
		}
	}
	for t, r := range next {
		_, ok := e.brakes.rows[t]
		changed = changed || !ok
		if !ok && r.State == driver.BrakeHalfOpen {
			e.markProbeLocked(t)
		}
	}
	e.brakes.rows = next
	return changed
}

// brakeConfigLocked is taskType's thresholds (e.brakes.mu held).
func (e *Engine) brakeConfigLocked(taskType string) driver.BrakeConfig {
	if c, ok := e.brakes.configs[taskType]; ok {
		return c
	}
	return e.cfg.BrakeDefaults
}

// markProbeLocked records that a probe of taskType started (or its
// brake half-opened) now (e.brakes.mu held).
func (e *Engine) markProbeLocked(taskType string) {
	if e.brakes.lastProbe == nil {
		e.brakes.lastProbe = map[string]time.Time{}
	}
	e.brakes.lastProbe[taskType] = time.Now()
}

// noRetryDue reports whether no due retry of taskType is known to wait at
// now.
func (e *Engine) noRetryDue(taskType string, now time.Time) bool {
	e.brakes.mu.Lock()
	defer e.brakes.mu.Unlock()
	return now.Before(e.brakes.retryDue[taskType])
}

// retryDueAt records that a retry of taskType comes due at at: the
// earliest of those known, or, with reset, at from now on.
func (e *Engine) retryDueAt(taskType string, at time.Time, reset bool) {
	e.brakes.mu.Lock()
	defer e.brakes.mu.Unlock()
	e.retryDueLocked(taskType, at, reset)
}

// retryDueLocked is retryDueAt with e.brakes.mu held.
func (e *Engine) retryDueLocked(taskType string, at time.Time, reset bool) {
	if e.brakes.retryDue == nil {
		e.brakes.retryDue = map[string]time.Time{}
	}
	if old, ok := e.brakes.retryDue[taskType]; reset || !ok || at.Before(old) {
		e.brakes.retryDue[taskType] = at
	}
}

// BrakesChanged rereads the brakes after a change made in this process
// (a manual close) and wakes the workers; a nil Engine (a client not
// started) does nothing.
func (e *Engine) BrakesChanged(ctx context.Context) {
	if e == nil {
		return
	}
	e.loadBrakes(ctx)
	e.WakeQueue("")
}

// brakeFilter removes the types whose brake is open or half open from a
// claim's types (see claimFilter); nil when none is left, so the claim
// claims nothing.
func (e *Engine) brakeFilter(types []string) []string {
	e.brakes.mu.Lock()
	defer e.brakes.mu.Unlock()
	if len(e.brakes.rows) == 0 || types == nil {
		return types
	}
	out := make([]string, 0, len(types))
	for _, t := range types {
		if _, braked := e.brakes.rows[t]; !braked {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// anyBraked reports whether a type's brake is open or half open.
func (e *Engine) anyBraked() bool {
	e.brakes.mu.Lock()
	defer e.brakes.mu.Unlock()
	return len(e.brakes.rows) > 0
}

// brakeFilterLimited removes the types whose brake is open or half open
// from a claim's limited types.
func (e *Engine) brakeFilterLimited(limited []limitedType) []limitedType {
	e.brakes.mu.Lock()
	defer e.brakes.mu.Unlock()
	if len(e.brakes.rows) == 0 {
		return limited
	}
	return slices.DeleteFunc(limited, func(lt limitedType) bool {
		_, braked := e.brakes.rows[lt.name]
		return braked
	})
}

// limitedNames are the names of limited types.
func limitedNames(limited []limitedType) []string {
	names := make([]string, 0, len(limited))
	for _, lt := range limited {
		names = append(names, lt.name)
	}
	return names
}

// judge returns taskType's judgement on this node, made on first use
// (e.brakes.mu held); nil when the type never brakes.
func (e *Engine) judgeLocked(taskType string) *brake.Type {
	if strings.HasPrefix(taskType, "keel.") { // keel's own types never brake
		return nil
	}
	c := e.brakeConfigLocked(taskType)
	if c.Window < 0 {
		return nil
	}
	j := e.brakes.judges[taskType]
	if j == nil {
		if e.brakes.judges == nil {
			e.brakes.judges = map[string]*brake.Type{}
		}
		j = brake.NewType(brake.Config{Window: max(c.Window, 1), Threshold: c.Threshold, Cooldown: c.Cooldown})
		if r, ok := e.brakes.rows[taskType]; ok && r.State == driver.BrakeHalfOpen {
			j.HalfOpened()
		}
		e.brakes.judges[taskType] = j
	}
	return j
}

// claimProbes lets the trickle of each half-open brake of types (the
// types a claim of queue p may take) through: up to the trickle's room,
// due retries first (the most tried, then the oldest: the tasks most
// likely to succeed once the downstream is back), then the tasks next in
// line. It returns how many probes it started, at most n.
func (e *Engine) claimProbes(p *producer, types []string, n int) int {
	if e.braker() == nil || n <= 0 {
		return 0
	}
	type room struct {
		t            string
		retry, fresh int
	}
	var rooms []room
	e.brakes.mu.Lock()
	for _, t := range types {
		if r, ok := e.brakes.rows[t]; ok && r.State == driver.BrakeHalfOpen {
			if j := e.judgeLocked(t); j != nil && j.Room() > 0 {
				// A task never tried goes as a scout when no retry came
				// due for a cooldown and no probe succeeded yet (once one
				// did, the retries that follow are the better probes), or
				// when none came due for ten cooldowns.
				idle, cooldown := time.Since(e.brakes.lastProbe[t]), e.brakeConfigLocked(t).Cooldown
				scout := idle >= cooldown && !j.Succeeded() || idle >= 10*cooldown
				rooms = append(rooms, room{t, j.Room(), j.FreshRoom(scout)})
			}
		}
	}
	e.brakes.mu.Unlock()
	started := 0
	for _, rm := range rooms {
		for _, retried := range []bool{true, false} {
			ask := min(rm.retry, n-started)
			if !retried {
				ask = min(ask, rm.fresh)
			}
			if ask <= 0 {
				break
			}
			now := e.cfg.Now()
			if retried && e.noRetryDue(rm.t, now) {
				continue
			}
			rows, err := e.drv.Claim(e.workCtx, driver.ClaimParams{Queue: p.name, Limit: ask, Types: []string{rm.t},
				Retried: retried, Owner: e.cfg.Node, Now: now, LeaseExpiresAt: now.Add(e.cfg.LeaseTTL)})
			if retried && err == nil && len(rows) == 0 {
				e.retryDueAt(rm.t, now.Add(e.cfg.SettingsInterval), true)
			}
			if err != nil {
				if e.workCtx.Err() == nil {
					e.cfg.Logger.Warn("keel: claiming brake probes failed", "type", rm.t, "error", err)
				}
				break
			}
			e.brakes.mu.Lock()
			j := e.judgeLocked(rm.t)
			for i := range rows {
				if j != nil {
					j.ProbeStarted(rows[i].Attempt <= 1)
				}
				e.markProbeLocked(rm.t)
				if e.brakes.probes == nil {
					e.brakes.probes = map[int64]string{}
				}
				e.brakes.probes[rows[i].ID] = rm.t
			}
			e.brakes.mu.Unlock()
			for i := range rows {
				row := &rows[i]
				e.cfg.Logger.Debug("keel: brake probe started", "type", rm.t, "task_id", row.ID, "attempt", row.Attempt)
				e.applyTypeSettings(row)
				e.startExecution(p, row)
			}
			started += len(rows)
			rm.retry -= len(rows)
		}
	}
	return started
}

// judgeAttempt feeds an attempt's outcome, as decided when its handler
// returned, to its type's judgement and writes the change it calls for.
// judged is false for an attempt keel cut short, which says nothing. It
// reports whether the attempt was a half-open brake's probe.
func (e *Engine) judgeAttempt(row *driver.TaskRow, t driver.Transition, judged bool) (probe bool) {
	if e.braker() == nil {
		return false
	}
	o := brake.Outcome{Succeeded: judged && t.State == driver.StateSucceeded, Attempt: row.Attempt}
	if judged && t.Error != nil {
		o.Failed = t.Error.Outcome
	}
	e.brakes.mu.Lock()
	taskType, probe := e.brakes.probes[row.ID]
	delete(e.brakes.probes, row.ID)
	j := e.judgeLocked(row.Type)
	if j == nil {
		e.brakes.mu.Unlock()
		return probe
	}
	r, braked := e.brakes.rows[row.Type]
	if braked && t.State == driver.StatePending && t.Error != nil {
		// A retry this node scheduled: the trickle asks for due retries
		// again when it comes due.
		e.retryDueLocked(row.Type, t.RunAt, false)
	}
	action := brake.Keep
	switch {
	case probe && braked && r.State == driver.BrakeHalfOpen && taskType == row.Type:
		action = j.Probe(o, e.cfg.Now())
	case !braked:
		action = j.Closed(brake.Of(o))
	default:
		j.Closed(brake.Of(o)) // begun before the brake opened: evidence all the same
	}
	if action == brake.Keep || e.brakes.writing[row.Type] {
		e.brakes.mu.Unlock()
		return probe
	}
	if e.brakes.writing == nil {
		e.brakes.writing = map[string]bool{}
	}
	e.brakes.writing[row.Type] = true
	cfg := e.brakeConfigLocked(row.Type)
	failed, n := j.Window().Counts()
	reason := j.Reason(cfg.Cooldown)
	now := e.cfg.Now()
	if action != brake.Close {
		// Hold the type's claims back from now on, not from when the
		// write commits: the other workers' claims meanwhile would run
		// more of its tasks against the failing downstream.
		e.brakes.rows[row.Type] = driver.BrakeRow{Type: row.Type, State: driver.BrakeOpen, OpenedAt: now, Until: now.Add(cfg.Cooldown)}
	}
	e.brakes.mu.Unlock()

	ch := driver.BrakeChange{Now: now}
	level, msg := slog.LevelWarn, ""
	switch action {
	case brake.Open:
		ch.From = []driver.BrakeState{driver.BrakeClosed}
		ch.To = driver.BrakeRow{Type: row.Type, State: driver.BrakeOpen, OpenedAt: now, Until: now.Add(cfg.Cooldown),
			Ratio: float64(failed) / float64(max(n, 1)), Attempts: n, Reason: reason, ClosedAt: r.ClosedAt}
		msg = "keel: brake opened"
	case brake.Reopen:
		ch.From = []driver.BrakeState{driver.BrakeHalfOpen}
		ch.To = r
		ch.To.State, ch.To.Until = driver.BrakeOpen, now.Add(cfg.Cooldown)
		ch.To.Reason = fmt.Sprintf("probe task %d failed: %s; paused again for %v", row.ID, probeError(t), cfg.Cooldown)
		msg = "keel: brake reopened"
	case brake.Close:
		ch.From = []driver.BrakeState{driver.BrakeHalfOpen}
		ch.To = driver.BrakeRow{Type: row.Type, State: driver.BrakeClosed, OpenedAt: r.OpenedAt, Ratio: r.Ratio, Attempts: r.Attempts,
			ClosedAt: now, Reason: fmt.Sprintf("probes succeeded: %d of the last %d tasks judged failed", failed, n)}
		level, msg = slog.LevelInfo, "keel: brake closed"
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(e.workCtx), 10*time.Second)
	defer cancel()
	applied, err := e.braker().ChangeBrake(ctx, ch)
	e.brakes.mu.Lock()
	delete(e.brakes.writing, row.Type)
	if e.brakes.wrote == nil {
		e.brakes.wrote = map[string]uint64{}
	}
	e.brakes.seq++
	e.brakes.wrote[row.Type] = e.brakes.seq
	switch {
	case err == nil && applied && ch.To.State == driver.BrakeClosed:
		delete(e.brakes.rows, row.Type)
		j.HalfOpened()
	case err == nil && applied:
		e.brakes.rows[row.Type] = ch.To
	case action == brake.Open:
		delete(e.brakes.rows, row.Type) // not opened here: the next read of the brakes says what holds
	case action == brake.Reopen:
		e.brakes.rows[row.Type] = r
	}
	e.brakes.mu.Unlock()
	switch {
	case err != nil:
		e.cfg.Logger.Warn("keel: writing a brake change failed; the next attempt judged tries again", "type", row.Type, "error", err)
	case applied:
		e.cfg.Logger.Log(ctx, level, msg, "type", row.Type, "state", ch.To.State, "reason", ch.To.Reason)
		if action == brake.Close {
			e.WakeQueue("")
		}
	}
	return probe
}

// probeError is a failed probe's error, in a few words.
func probeError(t driver.Transition) string {
	if t.Error == nil {
		return "failed"
	}
	return shorten.String(t.Error.Error, 200)
}

// evaluateBrakes is the leader's round (every SettingsInterval): it turns
// the open brakes whose cooldown is over half open.
func (e *Engine) evaluateBrakes(ctx context.Context) {
	b := e.braker()
	if b == nil || !e.Leading() {
		return
	}
	if err := e.brakeRound(ctx, b); err != nil && ctx.Err() == nil {
		e.cfg.Logger.Warn("keel: evaluating brakes failed", "error", err)
	}
}

func (e *Engine) brakeRound(ctx context.Context, b driver.Braker) error {
	now := e.cfg.Now()
	rows, err := b.ListBrakes(ctx)
	if err != nil {
		return err
	}
	changed := false
	for _, r := range rows {
		if r.State != driver.BrakeOpen || now.Before(r.Until) {
			continue
		}
		to := r
		to.State, to.ProbeOwner, to.ProbeTaskID, to.ProbeAt, to.ProbeAttempt = driver.BrakeHalfOpen, "", 0, time.Time{}, 0
		to.Reason = fmt.Sprintf("cooldown over: a trickle of probe tasks runs, at first %d at a time on each node", brake.InitialWidth)
		ok, err := b.ChangeBrake(ctx, driver.BrakeChange{To: to, From: []driver.BrakeState{driver.BrakeOpen}, Now: now})
		if err != nil {
			return err
		}
		if ok {
			changed = true
			e.cfg.Logger.Info("keel: brake half open", "type", to.Type, "reason", to.Reason)
		}
	}
	if changed {
		e.BrakesChanged(ctx)
	}
	return nil
}

// overlay is c's set fields (non-zero) over d.
func overlay(d, c driver.BrakeConfig) driver.BrakeConfig {
	if c.Window != 0 {
		d.Window = c.Window
	}
	if c.Threshold > 0 {
		d.Threshold = c.Threshold
	}
	if c.Cooldown > 0 {
		d.Cooldown = c.Cooldown
	}
	return d
}
