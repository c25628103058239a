package keel

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/check"
	"github.com/keelq/keel/internal/ramp"
)

// Ramp raises a task type's cluster-wide concurrency step by step while
// its failure ratio stays low (seed 000 §4.3: find out what downstream can
// take before raising concurrency). It starts at Steps[0]; every Every the
// leader looks at the type's attempts that ended since the last step (in
// the whole minutes after the step's minute, so that none ran at the
// step before): with
// at least MinAttempts of them and a failure ratio at most
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

// withDefaults fills the zero fields.
func (r Ramp) withDefaults() Ramp {
	if r.Every == 0 {
		r.Every = 10 * time.Minute
	}
	if r.MaxFailureRatio == 0 {
		r.MaxFailureRatio = 0.2
	}
	if r.MinAttempts == 0 {
		r.MinAttempts = 20
	}
	return r
}

// Validate reports what is wrong with r (its zero fields taken as their
// defaults), as an ErrInvalid error.
func (r Ramp) Validate() error {
	r = r.withDefaults()
	if len(r.Steps) == 0 || len(r.Steps) > 100 {
		return invalid("a ramp needs 1..100 steps, got %d", len(r.Steps))
	}
	for i, s := range r.Steps {
		if s < 1 || s > 10000 {
			return invalid("ramp step %d must be in 1..10000, got %d", i+1, s)
		}
		if i > 0 && s <= r.Steps[i-1] {
			return invalid("ramp steps must rise, got %d after %d", s, r.Steps[i-1])
		}
	}
	if r.Every < time.Second || r.Every > 7*24*time.Hour {
		return invalid("ramp every must be in 1s..168h, got %s", check.Duration(r.Every))
	}
	if math.IsNaN(r.MaxFailureRatio) || r.MaxFailureRatio < 0 || r.MaxFailureRatio > 1 {
		return invalid("ramp max_failure_ratio must be in 0..1, got %v", r.MaxFailureRatio)
	}
	if r.MinAttempts < 0 || r.MinAttempts > 1_000_000 {
		return invalid("ramp min_attempts must be in 1..1000000 (0: the default 20), got %d", r.MinAttempts)
	}
	return nil
}

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
	if !validName(taskType) {
		return nil, invalid("invalid task type %q", taskType)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	r = r.withDefaults()
	r.Steps = slices.Clone(r.Steps)
	now := c.cfg.Now()
	st := &RampState{Type: taskType, Ramp: r, StepAt: now, NextAt: now.Add(r.Every), StartedAt: now, UpdatedAt: now}
	st.Done = len(r.Steps) == 1
	if err := c.ramps.SetStep(ctx, taskType, st.Concurrency()); err != nil {
		return nil, fmt.Errorf("keel: ramp %s to concurrency %d: %w", taskType, st.Concurrency(), unavailable(ctx, err))
	}
	if err := c.ramps.Put(ctx, taskType, st); err != nil {
		return nil, fmt.Errorf("keel: store ramp of %s: %w", taskType, unavailable(ctx, err))
	}
	return st, nil
}

// GetRamp returns taskType's ramp, or ErrNotFound when it never had one.
func (c *Client) GetRamp(ctx context.Context, taskType string) (*RampState, error) {
	if !validName(taskType) {
		return nil, invalid("invalid task type %q", taskType)
	}
	b, err := c.drv.GetMeta(ctx, ramp.Doc(taskType))
	if err != nil {
		return nil, fmt.Errorf("keel: get ramp of %s: %w", taskType, unavailable(ctx, err))
	}
	if b == nil {
		return nil, fmt.Errorf("keel: no ramp for task type %s: %w", taskType, ErrNotFound)
	}
	var st RampState
	if err := ramp.Decode(b, &st); err != nil {
		return nil, fmt.Errorf("keel: read ramp of %s: %w", taskType, err)
	}
	return &st, nil
}

// StopRamp stops taskType's ramp where it stands (its concurrency stays)
// and returns it; ErrNotFound when it never had one.
func (c *Client) StopRamp(ctx context.Context, taskType string) (*RampState, error) {
	st, err := c.GetRamp(ctx, taskType)
	if err != nil {
		return nil, err
	}
	if !st.Active() {
		return st, nil
	}
	st.Stopped, st.Reason, st.Note = true, "stopped by an operator", ""
	st.UpdatedAt = c.cfg.Now()
	if err := c.ramps.Put(ctx, st.Type, st); err != nil {
		return nil, fmt.Errorf("keel: store ramp of %s: %w", st.Type, unavailable(ctx, err))
	}
	return st, nil
}

// newRampJudge returns the service that advances c's ramps, as leader.
func newRampJudge(c *Client) *ramp.Judge {
	return ramp.New(ramp.Config{
		Driver: c.drv, Settings: c.drv, Interval: c.cfg.SettingsInterval, Now: c.cfg.Now, Logger: c.cfg.Logger,
		Leading: func() bool {
			return c.eng.Load().Leading()
		},
		Applied: func(s driver.Setting) {
			if e := c.eng.Load(); e != nil {
				e.ApplySetting(s)
			}
		},
	})
}
