package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/shorten"
)

// The automatic brake (see driver.BrakeRow). Every node keeps a snapshot
// of the brakes, read with the runtime settings and at once after a change
// of its own: a claim leaves out the types whose brake is open or half
// open, and a node with a handler and a free slot takes a half-open
// brake's probe (claimProbes). The leader decides every other change
// (evaluateBrakes): it opens a closed brake when the type's failure ratio
// passes its threshold, half-opens an open one after its cooldown, and
// closes or reopens a half-open one by its probe task's outcome.

// brakeLookback bounds how far back the leader reads the history to find
// a type's latest attempts: a type with fewer than its window of attempts
// in that time is not judged (it fails too seldom to need a brake), and
// the leader's read every SettingsInterval stays small.
const brakeLookback = 15 * time.Minute

// brakes is the snapshot of the stored brakes that are not closed.
type brakes struct {
	mu   sync.Mutex
	rows map[string]driver.BrakeRow
}

// braker returns the driver's brake storage, or nil.
func (e *Engine) braker() driver.Braker {
	b, _ := e.drv.(driver.Braker)
	return b
}

// loadBrakes reads the brakes and reports whether the set of braked
// types or their probes changed.
func (e *Engine) loadBrakes(ctx context.Context) bool {
	b := e.braker()
	if b == nil {
		return false
	}
	lctx, cancel := context.WithTimeout(ctx, max(e.cfg.SettingsInterval, time.Second))
	defer cancel()
	rows, err := b.ListBrakes(lctx)
	if err != nil {
		if ctx.Err() == nil {
			e.cfg.Logger.Warn("keel: reading brakes failed", "error", err)
		}
		return false
	}
	next := map[string]driver.BrakeRow{}
	for _, r := range rows {
		if r.State != driver.BrakeClosed {
			next[r.Type] = r
		}
	}
	e.brakes.mu.Lock()
	defer e.brakes.mu.Unlock()
	changed := len(next) != len(e.brakes.rows)
	for t, r := range next {
		o, ok := e.brakes.rows[t]
		changed = changed || !ok || o.State != r.State || o.ProbeOwner != r.ProbeOwner
	}
	e.brakes.rows = next
	return changed
}

// BrakesChanged rereads the brakes after a change made in this process
// (a manual close) and wakes the workers.
func (e *Engine) BrakesChanged(ctx context.Context) {
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

// claimProbes takes the probe of each half-open brake of types (the types
// a claim of queue p may take) that has none: it claims one ready task of
// the type and records it as the probe in one conditional write, so that
// exactly one node across the cluster runs it; a node that lost the race
// releases its task at once, with its attempt refunded. It returns how
// many probes it started, at most n.
func (e *Engine) claimProbes(p *producer, types []string, n int) int {
	b := e.braker()
	if b == nil || n <= 0 {
		return 0
	}
	e.brakes.mu.Lock()
	var free []driver.BrakeRow
	for _, t := range types {
		if r, ok := e.brakes.rows[t]; ok && r.State == driver.BrakeHalfOpen && r.ProbeOwner == "" {
			free = append(free, r)
		}
	}
	e.brakes.mu.Unlock()
	started := 0
	for _, br := range free {
		if started == n {
			break
		}
		now := e.cfg.Now()
		rows, err := e.drv.Claim(e.workCtx, driver.ClaimParams{Queue: p.name, Limit: 1, Types: []string{br.Type},
			Owner: e.cfg.Node, Now: now, LeaseExpiresAt: now.Add(e.cfg.LeaseTTL)})
		if err != nil || len(rows) == 0 {
			continue
		}
		row := &rows[0]
		to := br
		to.ProbeOwner, to.ProbeAt, to.ProbeTaskID, to.ProbeAttempt = e.cfg.Node, now, row.ID, row.Attempt
		to.Reason = fmt.Sprintf("probe: task %d on node %s", row.ID, e.cfg.Node)
		took, err := b.ChangeBrake(e.workCtx, driver.BrakeChange{To: to, From: []driver.BrakeState{driver.BrakeHalfOpen},
			OwnerCheck: true, Owner: "", Now: now})
		e.brakes.mu.Lock()
		if r, ok := e.brakes.rows[br.Type]; ok {
			r.ProbeOwner = to.ProbeOwner // taken, by us or by another node
			e.brakes.rows[br.Type] = r
		}
		e.brakes.mu.Unlock()
		if err != nil || !took {
			// Another node took the probe: give the task back untouched.
			_, ferr := e.drv.Finish(e.workCtx, driver.FinishParams{Owner: e.cfg.Node, Now: now, Transitions: []driver.Transition{
				{ID: row.ID, Fence: row.Fence, State: driver.StatePending, RunAt: now, Refund: true, Task: row}}})
			if ferr != nil {
				e.cfg.Logger.Warn("keel: releasing a task claimed for a brake probe failed; it is rescued when its lease expires",
					"task_id", row.ID, "type", row.Type, "error", ferr)
			}
			continue
		}
		e.cfg.Logger.Info("keel: brake probe started", "type", br.Type, "task_id", row.ID, "node", e.cfg.Node)
		e.applyTypeSettings(row)
		e.observeStart(row)
		e.startExecution(p, row)
		started++
	}
	return started
}

// evaluateBrakes is the leader's round (every SettingsInterval): open,
// half-open, close and reopen brakes as their types' attempts say.
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
	byType := map[string]driver.BrakeRow{}
	for _, r := range rows {
		byType[r.Type] = r
	}
	changed := false
	change := func(c driver.BrakeChange, level slog.Level, msg string) error {
		c.Now = now
		ok, err := b.ChangeBrake(ctx, c)
		if err != nil {
			return err
		}
		if ok {
			changed = true
			e.cfg.Logger.Log(ctx, level, msg, "type", c.To.Type, "state", c.To.State, "reason", c.To.Reason)
		}
		return nil
	}
	if err := e.openBrakes(ctx, now, byType, change); err != nil {
		return err
	}
	for _, r := range rows {
		switch {
		case r.State == driver.BrakeOpen && !now.Before(r.Until):
			to := r
			to.State, to.ProbeOwner, to.ProbeTaskID, to.ProbeAt, to.ProbeAttempt = driver.BrakeHalfOpen, "", 0, time.Time{}, 0
			to.Reason = "cooldown over: waiting for one probe task"
			if err := change(driver.BrakeChange{To: to, From: []driver.BrakeState{driver.BrakeOpen}}, slog.LevelInfo, "keel: brake half open"); err != nil {
				return err
			}
		case r.State == driver.BrakeHalfOpen && r.ProbeOwner != "":
			if err := e.judgeProbe(ctx, now, r, change); err != nil {
				return err
			}
		}
	}
	if changed {
		e.BrakesChanged(ctx)
	}
	return nil
}

// openBrakes opens the closed brakes whose type's failure ratio over its
// latest attempts (since the brake last closed) reaches the threshold.
func (e *Engine) openBrakes(ctx context.Context, now time.Time, byType map[string]driver.BrakeRow,
	change func(driver.BrakeChange, slog.Level, string) error) error {
	minutes, err := e.drv.Minutes(ctx, now.Add(-brakeLookback))
	if err != nil {
		return err
	}
	perType := map[string][]driver.MinuteRow{} // one row per minute, oldest first
	for _, m := range minutes {
		if strings.HasPrefix(m.Type, "keel.") || m.Ended == 0 { // keel's own types never brake
			continue
		}
		ms := perType[m.Type]
		if n := len(ms); n > 0 && ms[n-1].Minute == m.Minute {
			ms[n-1].Add(m)
		} else {
			ms = append(ms, m)
		}
		perType[m.Type] = ms
	}
	if len(perType) == 0 {
		return nil
	}
	declared, err := e.drv.ListTypes(ctx, slices.Sorted(maps.Keys(perType)))
	if err != nil {
		return err
	}
	cfgOf := map[string]driver.BrakeConfig{}
	for _, d := range declared {
		cfgOf[d.Name] = d.Brake
	}
	for t, ms := range perType {
		r, ok := byType[t]
		if ok && r.State != driver.BrakeClosed {
			continue
		}
		cfg := overlay(e.brakeConfig(cfgOf[t]), r.Config)
		if cfg.Window < 0 {
			continue
		}
		var from int64 // the first minute that counts: the one after the brake last closed
		if ok && !r.ClosedAt.IsZero() {
			from = driver.DueMinute(r.ClosedAt) + 1
		}
		var ended, failed int64
		for i := len(ms) - 1; i >= 0 && ended < int64(cfg.Window); i-- {
			if ms[i].Minute < from {
				break
			}
			ended, failed = ended+ms[i].Ended, failed+ms[i].Failed
		}
		if ended < int64(cfg.Window) {
			continue
		}
		ratio := float64(failed) / float64(ended)
		if ratio < cfg.Threshold {
			continue
		}
		to := driver.BrakeRow{Type: t, State: driver.BrakeOpen, OpenedAt: now, Until: now.Add(cfg.Cooldown),
			Ratio: ratio, Attempts: int(ended), ClosedAt: r.ClosedAt,
			Reason: fmt.Sprintf("%d of the last %d attempts failed (threshold %.0f%%): paused for %v", failed, ended, 100*cfg.Threshold, cfg.Cooldown)}
		if err := change(driver.BrakeChange{To: to, From: []driver.BrakeState{driver.BrakeClosed}}, slog.LevelWarn, "keel: brake opened"); err != nil {
			return err
		}
	}
	return nil
}

// judgeProbe closes a half-open brake whose probe task succeeded, reopens
// it when the probe failed, and frees the probe when its task went back
// without an outcome (a release on shutdown, a snooze, a cancel).
func (e *Engine) judgeProbe(ctx context.Context, now time.Time, r driver.BrakeRow,
	change func(driver.BrakeChange, slog.Level, string) error) error {
	probe := driver.BrakeChange{From: []driver.BrakeState{driver.BrakeHalfOpen}, OwnerCheck: true, Owner: r.ProbeOwner}
	if r.ProbeTaskID == 0 {
		return nil
	}
	task, err := e.drv.Get(ctx, r.ProbeTaskID)
	if err != nil && !errors.Is(err, driver.ErrNotFound) {
		return err
	}
	var lastErr *driver.AttemptError
	if task != nil && len(task.Errors) > 0 {
		lastErr = &task.Errors[len(task.Errors)-1]
	}
	cfg := overlay(e.brakeConfig(driver.BrakeConfig{}), r.Config)
	if decl, err := e.drv.ListTypes(ctx, []string{r.Type}); err == nil && len(decl) == 1 {
		cfg = overlay(e.brakeConfig(decl[0].Brake), r.Config)
	}
	switch {
	case task != nil && task.State == driver.StateSucceeded:
		probe.To = driver.BrakeRow{Type: r.Type, State: driver.BrakeClosed, OpenedAt: r.OpenedAt, Ratio: r.Ratio, Attempts: r.Attempts,
			ClosedAt: now, Reason: fmt.Sprintf("probe task %d succeeded", r.ProbeTaskID)}
		return change(probe, slog.LevelInfo, "keel: brake closed")
	case task != nil && task.State == driver.StateRunning && task.Attempt == r.ProbeAttempt:
		return nil // still running
	case task != nil && (task.State == driver.StateDead || task.Attempt > r.ProbeAttempt ||
		lastErr != nil && lastErr.Attempt >= r.ProbeAttempt && task.State != driver.StateCancelled):
		why := "failed"
		if lastErr != nil {
			why = "failed: " + lastErr.Error
		}
		probe.To = r
		probe.To.State, probe.To.Until = driver.BrakeOpen, now.Add(cfg.Cooldown)
		probe.To.ProbeOwner, probe.To.ProbeTaskID, probe.To.ProbeAt, probe.To.ProbeAttempt = "", 0, time.Time{}, 0
		probe.To.Reason = fmt.Sprintf("probe task %d %s: paused again for %v", r.ProbeTaskID, shorten.String(why, 300), cfg.Cooldown)
		return change(probe, slog.LevelWarn, "keel: brake reopened")
	}
	// Gone, cancelled, or back to pending without an outcome: another
	// probe may be taken.
	probe.To = r
	probe.To.ProbeOwner, probe.To.ProbeTaskID, probe.To.ProbeAt, probe.To.ProbeAttempt = "", 0, time.Time{}, 0
	probe.To.Reason = fmt.Sprintf("probe task %d ended without an outcome: waiting for another probe", r.ProbeTaskID)
	return change(probe, slog.LevelInfo, "keel: brake probe released")
}

// brakeConfig is a type's declared brake thresholds over the defaults.
func (e *Engine) brakeConfig(c driver.BrakeConfig) driver.BrakeConfig {
	return overlay(e.cfg.BrakeDefaults, c)
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
