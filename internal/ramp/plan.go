package ramp

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/check"
	"github.com/keelq/keel/internal/kerr"
)

// Plan is a ramp as the caller starts it (keel.Ramp documents each
// field and its default).
type Plan struct {
	Steps           []int         `json:"steps"`
	Every           time.Duration `json:"every"`
	MaxFailureRatio float64       `json:"max_failure_ratio"`
	MinAttempts     int           `json:"min_attempts"`
}

// WithDefaults fills the zero fields: Every 10m, MaxFailureRatio 0.2,
// MinAttempts 20.
func (p Plan) WithDefaults() Plan {
	if p.Every == 0 {
		p.Every = 10 * time.Minute
	}
	if p.MaxFailureRatio == 0 {
		p.MaxFailureRatio = 0.2
	}
	if p.MinAttempts == 0 {
		p.MinAttempts = 20
	}
	return p
}

// Validate reports what is wrong with p (its zero fields taken as their
// defaults), as a kerr.ErrInvalid error.
func (p Plan) Validate() error {
	p = p.WithDefaults()
	if len(p.Steps) == 0 || len(p.Steps) > 100 {
		return kerr.Invalid("a ramp needs 1..100 steps, got %d", len(p.Steps))
	}
	for i, s := range p.Steps {
		if s < 1 || s > 10000 {
			return kerr.Invalid("ramp step %d must be in 1..10000, got %d", i+1, s)
		}
		if i > 0 && s <= p.Steps[i-1] {
			return kerr.Invalid("ramp steps must rise, got %d after %d", s, p.Steps[i-1])
		}
	}
	if p.Every < time.Second || p.Every > 7*24*time.Hour {
		return kerr.Invalid("ramp every must be in 1s..168h, got %s", check.Duration(p.Every))
	}
	if math.IsNaN(p.MaxFailureRatio) || p.MaxFailureRatio < 0 || p.MaxFailureRatio > 1 {
		return kerr.Invalid("ramp max_failure_ratio must be in 0..1, got %v", p.MaxFailureRatio)
	}
	if p.MinAttempts < 0 || p.MinAttempts > 1_000_000 {
		return kerr.Invalid("ramp min_attempts must be in 1..1000000 (0: the default 20), got %d", p.MinAttempts)
	}
	return nil
}

// The API's calls on ramps. An invalid type name is kerr.ErrInvalid; a
// driver's error goes through Config.Wrap.

// Begin starts (or restarts from its first step) a ramp of p for
// taskType: it sets the type's concurrency to the first step at once and
// stores the ramp.
func (j *Judge) Begin(ctx context.Context, taskType string, p Plan) (*State, error) {
	if err := checkType(taskType); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.WithDefaults()
	p.Steps = slices.Clone(p.Steps)
	now := j.clk.Now()
	st := &State{Type: taskType, Plan: p, StepAt: now, NextAt: now.Add(p.Every), StartedAt: now, UpdatedAt: now}
	st.Done = len(p.Steps) == 1
	if err := j.SetStep(ctx, taskType, st.Concurrency()); err != nil {
		return nil, fmt.Errorf("keel: ramp %s to concurrency %d: %w", taskType, st.Concurrency(), j.cfg.Wrap(ctx, err))
	}
	if err := j.Put(ctx, taskType, st); err != nil {
		return nil, fmt.Errorf("keel: store ramp of %s: %w", taskType, j.cfg.Wrap(ctx, err))
	}
	return st, nil
}

// Get returns taskType's ramp; driver.ErrNotFound when it never had one.
func (j *Judge) Get(ctx context.Context, taskType string) (*State, error) {
	if err := checkType(taskType); err != nil {
		return nil, err
	}
	b, err := j.cfg.Driver.GetMeta(ctx, Doc(taskType))
	if err != nil {
		return nil, fmt.Errorf("keel: get ramp of %s: %w", taskType, j.cfg.Wrap(ctx, err))
	}
	if b == nil {
		return nil, fmt.Errorf("keel: no ramp for task type %s: %w", taskType, driver.ErrNotFound)
	}
	var st State
	if err := Decode(b, &st); err != nil {
		return nil, fmt.Errorf("keel: read ramp of %s: %w", taskType, err)
	}
	return &st, nil
}

// Halt stops taskType's ramp where it stands (its concurrency stays) and
// returns it; a ramp already over is returned as it is.
func (j *Judge) Halt(ctx context.Context, taskType string) (*State, error) {
	st, err := j.Get(ctx, taskType)
	if err != nil || !st.Active() {
		return st, err
	}
	st.Stopped, st.Reason, st.Note = true, "stopped by an operator", ""
	st.UpdatedAt = j.clk.Now()
	if err := j.Put(ctx, st.Type, st); err != nil {
		return nil, fmt.Errorf("keel: store ramp of %s: %w", st.Type, j.cfg.Wrap(ctx, err))
	}
	return st, nil
}

// checkType refuses an invalid task type name.
func checkType(taskType string) error {
	if !driver.ValidName(taskType) {
		return kerr.Invalid("invalid task type %q", taskType)
	}
	return nil
}
