package driver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// The automatic brake (keel_brakes): when a task type's failed share over
// its last pieces of evidence (tasks' first failures and successes)
// reaches a threshold, a node opens the type's brake and its tasks are not
// claimed for a cooldown; then a trickle of probe tasks runs (half_open),
// until fresh tasks succeed again (closed) or a probe finds the type still
// failing (open again). The engine decides every change; a driver reads
// and writes rows, each write conditional on the state it changes from.

// BrakeState is the state of a type's brake.
type BrakeState string

// The states of a brake. A type without a row is closed.
const (
	BrakeClosed   BrakeState = "closed"
	BrakeOpen     BrakeState = "open"
	BrakeHalfOpen BrakeState = "half_open"
)

// BrakeConfig holds a type's brake thresholds: the brake opens when, of
// the type's last Window finished attempts (since the brake last closed),
// the failed share reaches Threshold; it stays open for Cooldown before a
// probe. Zero fields take keel's defaults; Window -1 turns the brake off
// for the type.
type BrakeConfig struct {
	Window    int
	Threshold float64
	Cooldown  time.Duration
}

// BrakeRow is one row of keel_brakes.
type BrakeRow struct {
	Type     string
	State    BrakeState
	OpenedAt time.Time // zero: never opened
	// Until is when an open brake lets a probe through.
	Until time.Time
	// ProbeTaskID, ProbeOwner, ProbeAt and ProbeAttempt describe the
	// probe of a half-open brake: the node that took it and when, the
	// task it claimed (0: none yet) and that task's attempt.
	ProbeTaskID  int64
	ProbeOwner   string
	ProbeAt      time.Time
	ProbeAttempt int
	// Ratio and Attempts are the failure ratio and the number of attempts
	// it was measured over when the brake last opened.
	Ratio    float64
	Attempts int
	// Reason says in a few words why the brake last changed.
	Reason    string
	ClosedAt  time.Time // zero: never closed
	UpdatedAt time.Time
	// Config holds thresholds set at runtime (SetBrakeConfig), over the
	// type's declared ones; ChangeBrake leaves it alone.
	Config BrakeConfig
}

// BrakeChange writes a brake's whole row (To, with To.Type the type) when
// its stored state is one of From; a type without a row counts as closed.
// When OwnerCheck is set, the row's probe owner must also be Owner (""
// for none): that is how exactly one node across the cluster takes a
// half-open brake's probe. Now is recorded as updated_at (drivers that
// use the database clock ignore it).
type BrakeChange struct {
	To         BrakeRow
	From       []BrakeState
	OwnerCheck bool
	Owner      string
	Now        time.Time
}

// Validate rejects a change no driver stores.
func (c BrakeChange) Validate() error {
	valid := func(s BrakeState) bool { return s == BrakeClosed || s == BrakeOpen || s == BrakeHalfOpen }
	switch {
	case c.To.Type == "":
		return errors.New("change brake: empty type")
	case !valid(c.To.State):
		return fmt.Errorf("change brake: unknown state %q", c.To.State)
	case len(c.From) == 0 || len(c.From) > 3:
		return errors.New("change brake: from must list 1 to 3 states")
	case c.To.Ratio < 0 || c.To.Ratio > 1 || math.IsNaN(c.To.Ratio) || c.To.Attempts < 0:
		return fmt.Errorf("change brake: ratio %v or attempts %d out of range", c.To.Ratio, c.To.Attempts)
	}
	for _, s := range c.From {
		if !valid(s) {
			return fmt.Errorf("change brake: unknown state %q", s)
		}
	}
	return nil
}

// FromClosed reports whether c applies to a type without a row.
func (c BrakeChange) FromClosed() bool {
	for _, s := range c.From {
		if s == BrakeClosed {
			return true
		}
	}
	return false
}

// FromArgs are c.From padded to three states, for a statement's
// "state IN (?, ?, ?)".
func (c BrakeChange) FromArgs() [3]string {
	var out [3]string
	for i := range out {
		out[i] = string(c.From[min(i, len(c.From)-1)])
	}
	return out
}

// Braker is implemented by drivers that store brakes (every keel driver).
// The engine discovers it with a type assertion, so a driver from before
// the brake still works, without one.
type Braker interface {
	// ListBrakes returns every stored brake ordered by type.
	ListBrakes(ctx context.Context) ([]BrakeRow, error)
	// ChangeBrake applies c (see BrakeChange) and reports whether it did.
	ChangeBrake(ctx context.Context, c BrakeChange) (bool, error)
	// SetBrakeConfig stores a type's runtime brake thresholds (see
	// BrakeRow.Config), creating a closed brake when it has none.
	SetBrakeConfig(ctx context.Context, p BrakeConfigParams) error
}

// BrakeConfigParams sets the runtime brake thresholds of Type; Now is
// recorded as updated_at.
type BrakeConfigParams struct {
	Type   string
	Config BrakeConfig
	Now    time.Time
}

// Validate rejects thresholds out of range: Window -1..10000, Threshold
// 0..1, Cooldown 0..24h in whole milliseconds (zero fields: not set).
func (p BrakeConfigParams) Validate() error {
	c := p.Config
	switch {
	case p.Type == "":
		return errors.New("set brake config: empty type")
	case c.Window < -1 || c.Window > 10000:
		return fmt.Errorf("brake window must be in 1..10000 (0: not set, -1: off), got %d", c.Window)
	case c.Threshold < 0 || c.Threshold > 1 || math.IsNaN(c.Threshold):
		return fmt.Errorf("brake threshold must be in (0, 1] (0: not set), got %v", c.Threshold)
	case c.Cooldown < 0 || c.Cooldown > 24*time.Hour:
		return fmt.Errorf("brake cooldown must be in 0..24h (0: not set), got %v", c.Cooldown)
	case c.Cooldown%time.Millisecond != 0:
		// SettingMillis would keep 1ns as 1ms: refuse what cannot be kept.
		return fmt.Errorf("brake cooldown must be a whole number of milliseconds (settings are stored in ms), got %q", c.Cooldown.String())
	}
	return nil
}
