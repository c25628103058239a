package keel

import (
	"context"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/ramp"
)

// Ramp raises a task type's cluster-wide concurrency step by step while
// its failure ratio stays low (seed 000 §4.3: find out what downstream can
// take before raising concurrency). It starts at Steps[0]; every Every the
// leader looks at the type's attempts that ended since the last step (in
// the whole minutes after the step's minute, so that none ran at the step
// before): with at least MinAttempts of them and a failure ratio at most
// MaxFailureRatio it sets the next step's concurrency, otherwise it stops
// the ramp, keeps the current concurrency and says why (an ERROR log and
// RampState.Reason). Too few attempts wait for more.
type Ramp struct {
	// Steps are the concurrencies in order, each 1..10000 and above the
	// one before; at least one. Required.
	Steps []int `json:"steps"`
	// Every is how long each step lasts, at least 1s. Default 10m.
	Every time.Duration `json:"every"`
	// MaxFailureRatio is the highest share of failed attempts (0..1) a
	// step may have and still advance. Default 0.2.
	MaxFailureRatio float64 `json:"max_failure_ratio"`
	// MinAttempts is how many attempts must have ended since the last
	// step before the ramp judges it. Default 20.
	MinAttempts int `json:"min_attempts"`
}

// Validate reports what is wrong with r (its zero fields taken as their
// defaults), as an ErrInvalid error.
func (r Ramp) Validate() error { return ramp.Plan(r).Validate() }

// RampState is a type's ramp and where it stands, stored in the database
// so that a new leader carries it on.
type RampState struct {
	Type string `json:"type"`
	Ramp
	// Step is the index in Steps of the concurrency set now.
	Step int `json:"step"`
	// StepAt is when the current step was set; NextAt when the leader
	// judges it (later while too few attempts ended).
	StepAt time.Time `json:"step_at"`
	NextAt time.Time `json:"next_at"`
	// Done: the last step is set; the ramp is over.
	Done bool `json:"done,omitempty"`
	// Stopped: the ramp stopped before its last step, for Reason.
	Stopped bool   `json:"stopped,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Note says what the ramp waits for, when it waits for attempts.
	Note      string    `json:"note,omitempty"`
	StartedAt time.Time `json:"started_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Concurrency is the concurrency of the current step.
func (s *RampState) Concurrency() int { return s.Steps[s.Step] }

// Active reports whether the ramp still runs.
func (s *RampState) Active() bool { return !s.Done && !s.Stopped }

// StartRamp starts (or restarts from its first step) a concurrency ramp
// for taskType: it sets the type's concurrency to the first step at once
// and returns the ramp's state. The started worker clients' leader
// advances it.
func (c *Client) StartRamp(ctx context.Context, taskType string, r Ramp) (*RampState, error) {
	return rampState(c.ramps.Begin(ctx, taskType, ramp.Plan(r)))
}

// GetRamp returns taskType's ramp, or ErrNotFound when it never had one.
func (c *Client) GetRamp(ctx context.Context, taskType string) (*RampState, error) {
	return rampState(c.ramps.Get(ctx, taskType))
}

// StopRamp stops taskType's ramp where it stands (its concurrency stays)
// and returns it; ErrNotFound when it never had one.
func (c *Client) StopRamp(ctx context.Context, taskType string) (*RampState, error) {
	return rampState(c.ramps.Halt(ctx, taskType))
}

// rampState returns the judge's answer as the API shows it.
func rampState(st *ramp.State, err error) (*RampState, error) {
	if err != nil {
		return nil, err
	}
	return &RampState{Type: st.Type, Ramp: Ramp(st.Plan), Step: st.Step, StepAt: st.StepAt, NextAt: st.NextAt,
		Done: st.Done, Stopped: st.Stopped, Reason: st.Reason, Note: st.Note, StartedAt: st.StartedAt,
		UpdatedAt: st.UpdatedAt}, nil
}

// newRampJudge returns the service that advances c's ramps, as leader.
func newRampJudge(c *Client) *ramp.Judge {
	return ramp.New(ramp.Config{
		Driver: c.drv, Settings: c.drv, Interval: c.cfg.SettingsInterval, Now: c.cfg.Now, Logger: c.cfg.Logger,
		Wrap: unavailable, Leading: func() bool { return c.eng.Load().Leading() },
		Applied: func(s driver.Setting) { c.eng.Load().ApplySetting(s) },
	})
}
