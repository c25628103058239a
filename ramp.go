package keel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/check"
	"github.com/keelq/keel/internal/engine"
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

// rampDoc is the keel_meta document of taskType's ramp.
func rampDoc(taskType string) string { return "ramp:" + taskType }

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
	if err := c.setRampStep(ctx, st); err != nil {
		return nil, err
	}
	if err := c.putRamp(ctx, st); err != nil {
		return nil, err
	}
	return st, nil
}

// GetRamp returns taskType's ramp, or ErrNotFound when it never had one.
func (c *Client) GetRamp(ctx context.Context, taskType string) (*RampState, error) {
	if !validName(taskType) {
		return nil, invalid("invalid task type %q", taskType)
	}
	b, err := c.drv.GetMeta(ctx, rampDoc(taskType))
	if err != nil {
		return nil, fmt.Errorf("keel: get ramp of %s: %w", taskType, unavailable(ctx, err))
	}
	if b == nil {
		return nil, fmt.Errorf("keel: no ramp for task type %s: %w", taskType, ErrNotFound)
	}
	var st RampState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("keel: read ramp of %s: %w", taskType, err)
	}
	if len(st.Steps) == 0 || st.Step < 0 || st.Step >= len(st.Steps) {
		return nil, fmt.Errorf("keel: read ramp of %s: step %d of %d", taskType, st.Step, len(st.Steps))
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
	if err := c.putRamp(ctx, st); err != nil {
		return nil, err
	}
	return st, nil
}

func (c *Client) putRamp(ctx context.Context, st *RampState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("keel: store ramp of %s: %w", st.Type, err)
	}
	if err := c.drv.PutMeta(ctx, rampDoc(st.Type), b, c.cfg.Now()); err != nil {
		return fmt.Errorf("keel: store ramp of %s: %w", st.Type, unavailable(ctx, err))
	}
	return nil
}

// setRampStep sets the type's concurrency to the ramp's current step.
func (c *Client) setRampStep(ctx context.Context, st *RampState) error {
	n := st.Concurrency()
	s, err := c.drv.PatchSetting(ctx, driver.SettingPatch{Kind: driver.SettingType, Name: st.Type, Concurrency: &n, Now: c.cfg.Now()})
	if err != nil {
		return fmt.Errorf("keel: ramp %s to concurrency %d: %w", st.Type, n, unavailable(ctx, err))
	}
	if e := c.engine(); e != nil {
		e.ApplySetting(*s)
	}
	return nil
}

// rampLoop runs in every started client: the leader judges the ramps due.
func (c *Client) rampLoop() engine.Loop {
	return engine.Loop{Interval: c.cfg.SettingsInterval, Run: func(ctx context.Context) {
		if e := c.engine(); e == nil || !e.Leading() {
			return
		}
		if err := c.evaluateRamps(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("keel: evaluating the ramps failed; next try in one interval", "error", err)
		}
	}}
}

// evaluateRamps judges every active ramp whose step is due. A ramp always
// has a type setting (its concurrency), so the settings list them.
func (c *Client) evaluateRamps(ctx context.Context) error {
	settings, err := c.drv.ListSettings(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range settings {
		if s.Kind != driver.SettingType {
			continue
		}
		st, err := c.GetRamp(ctx, s.Name)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err == nil {
			err = c.judgeRamp(ctx, st)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// judgeRamp advances, stops or keeps waiting one ramp.
func (c *Client) judgeRamp(ctx context.Context, st *RampState) error {
	now := c.cfg.Now()
	if !st.Active() || now.Before(st.NextAt) {
		return nil
	}
	// The attempts that ended in the whole minutes after the step's
	// minute: the history counts by minute, and the step's own minute
	// holds attempts of the step before, which would water the judgement
	// down. So every attempt judged ended at the step's concurrency.
	first := driver.DueMinute(st.StepAt) + 1
	rows, err := c.drv.Minutes(ctx, time.Unix(first*60, 0))
	if err != nil {
		return fmt.Errorf("keel: ramp of %s: read history: %w", st.Type, err)
	}
	var ended, failed int64
	for _, r := range rows {
		if r.Type == st.Type && r.Minute >= first {
			ended += r.Ended
			failed += r.Failed
		}
	}
	st.UpdatedAt = now
	switch {
	case ended < int64(st.MinAttempts):
		note := fmt.Sprintf("waiting for %d attempts at concurrency %d, %d so far", st.MinAttempts, st.Concurrency(), ended)
		if note == st.Note {
			return nil
		}
		st.Note = note
	case float64(failed) > st.MaxFailureRatio*float64(ended):
		st.Stopped, st.Note = true, ""
		st.Reason = fmt.Sprintf("failure ratio %.2f (%d of %d attempts) at concurrency %d is above %.2f; concurrency stays %d",
			float64(failed)/float64(ended), failed, ended, st.Concurrency(), st.MaxFailureRatio, st.Concurrency())
		c.cfg.Logger.Error("keel: ramp stopped", "type", st.Type, "reason", st.Reason)
	default:
		st.Step++
		st.StepAt, st.NextAt, st.Note = now, now.Add(st.Every), ""
		st.Done = st.Step == len(st.Steps)-1
		if err := c.setRampStep(ctx, st); err != nil {
			return err
		}
		c.cfg.Logger.Info("keel: ramp advanced", "type", st.Type, "concurrency", st.Concurrency(),
			"failed", failed, "attempts", ended)
	}
	return c.putRamp(ctx, st)
}
