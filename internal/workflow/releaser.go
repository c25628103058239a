// Package workflow runs task dependencies: a task that depends on others
// is inserted held (pending, run_at at driver.HeldUntil, which no claim
// reaches) with a wait row. The leader's Releaser reads the wait rows
// every Interval with their dependencies' states and, through the driver
// (driver.Workflows.Settle), releases a task whose dependencies all
// succeeded, cancels one whose dependency died or was cancelled (unless
// its workflow continues on failure), and drops the wait row of a task no
// longer held. Each decision is taken again by the driver under the wait
// row's lock, in the transaction that applies it, so a pass that is killed
// midway or runs twice never releases a task early or twice.
package workflow

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
)

// Interval is how often the leader's Releaser runs a pass.
const Interval = time.Second

// PerPass is the most wait rows one pass looks at (the next pass goes on
// after the last); Page how many it reads at once.
const (
	PerPass = 10_000
	Page    = 500
)

// rounds bounds how often a pass starts again after it cancelled a task
// (whose own dependents it then cancels in the same pass).
const rounds = 8

// Store is what a Releaser needs of a driver.
type Store interface {
	Waits(ctx context.Context, afterID int64, limit int) ([]driver.Wait, error)
	Settle(ctx context.Context, params driver.SettleParams) (driver.Verdict, error)
}

// Config wires a Releaser.
type Config struct {
	Store  Store
	Now    func() time.Time
	Logger *slog.Logger
	// Leading gates the passes: only the elected leader runs them. Nil:
	// always.
	Leading func() bool
}

// Releaser releases or cancels held tasks as their dependencies finish.
type Releaser struct {
	cfg Config
	// cursor is where the next pass starts: after the last wait row the
	// previous one read, so that more than PerPass waiting tasks are all
	// looked at in turn; 0 once a pass reached the end.
	cursor int64
}

// New returns a Releaser.
func New(cfg Config) *Releaser {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Releaser{cfg: cfg}
}

// Run is one pass as an engine loop runs it: while leading, errors logged.
func (r *Releaser) Run(ctx context.Context) {
	if r.cfg.Leading != nil && !r.cfg.Leading() {
		return
	}
	if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("keel: releasing held tasks failed; next try in one interval", "error", err)
	}
}

// Counts are what a pass did.
type Counts struct{ Released, Cancelled, Dropped int }

// RunOnce reads up to PerPass wait rows and settles those whose
// dependencies decide them; after a pass that cancelled a task it looks
// again (a few times at most), so a cancel reaches the dependents of the
// dependents at once. It stops at the first error.
func (r *Releaser) RunOnce(ctx context.Context) (Counts, error) {
	var total Counts
	for range rounds {
		c, err := r.pass(ctx)
		total.Released += c.Released
		total.Cancelled += c.Cancelled
		total.Dropped += c.Dropped
		if err != nil || c.Cancelled == 0 {
			return total, err
		}
	}
	return total, nil
}

func (r *Releaser) pass(ctx context.Context) (Counts, error) {
	var (
		c     Counts
		after = r.cursor
		seen  int
	)
	r.cursor = 0
	for seen < PerPass {
		waits, err := r.cfg.Store.Waits(ctx, after, min(Page, PerPass-seen))
		if err != nil {
			return c, err
		}
		for _, w := range waits {
			after = w.TaskID
			if Decide(w).Kind == driver.Keep {
				continue
			}
			v, err := r.cfg.Store.Settle(ctx, driver.SettleParams{TaskID: w.TaskID, Now: r.cfg.Now(), Decide: Decide})
			if err != nil {
				return c, err
			}
			switch v.Kind {
			case driver.Release:
				c.Released++
				r.cfg.Logger.Debug("keel: held task released", "task_id", w.TaskID)
			case driver.CancelHeld:
				c.Cancelled++
				r.cfg.Logger.Info("keel: held task cancelled", "task_id", w.TaskID, "reason", v.Reason)
			case driver.Drop:
				c.Dropped++
			}
		}
		seen += len(waits)
		if len(waits) < Page {
			return c, nil
		}
	}
	r.cursor = after // PerPass read: the next pass goes on from here
	return c, nil
}

// Decide is what becomes of a held task: released when every dependency
// succeeded; when one is dead, cancelled or no longer stored, cancelled
// with that reason, or under OnFailureContinue released once every
// dependency reached a final state; otherwise kept waiting. A wait row
// whose task is no longer held (a user cancelled it) is dropped.
func Decide(w driver.Wait) driver.Verdict {
	if !w.Held {
		return driver.Verdict{Kind: driver.Drop}
	}
	final := true
	var failed *driver.Dep
	for i, d := range w.Deps {
		switch d.State {
		case driver.StateSucceeded:
		case driver.StateDead, driver.StateCancelled, "":
			if failed == nil {
				failed = &w.Deps[i]
			}
		default:
			final = false
		}
	}
	switch {
	case failed == nil && final:
		return driver.Verdict{Kind: driver.Release}
	case w.OnFailure == driver.OnFailureContinue:
		if final {
			return driver.Verdict{Kind: driver.Release}
		}
	case failed != nil:
		return driver.Verdict{Kind: driver.CancelHeld, Reason: Reason(*failed)}
	}
	return driver.Verdict{Kind: driver.Keep}
}

// Reason is the error recorded in the errors of a task cancelled because
// of its dependency d: "dependency 12 (B) is dead".
func Reason(d driver.Dep) string {
	name := ""
	if d.Name != "" {
		name = fmt.Sprintf(" (%s)", d.Name)
	}
	if d.State == "" {
		return fmt.Sprintf("dependency %d%s is no longer stored", d.ID, name)
	}
	return fmt.Sprintf("dependency %d%s is %s", d.ID, name, d.State)
}
