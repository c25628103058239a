// Package ramp judges concurrency ramps: every Interval the leader looks
// at each active ramp whose step is due and, from the type's attempts that
// ended at the step's concurrency, raises the type's concurrency to the
// next step, stops the ramp, or waits for more attempts. A ramp's state is
// a document in the driver's keel_meta, so a new leader carries it on.
package ramp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/service"
)

// State is a type's ramp and where it stands: the stored document. Its
// JSON is the public keel.RampState's, field for field.
type State struct {
	Type      string    `json:"type"`
	Plan                // its fields are the document's, as keel.RampState's Ramp
	Step      int       `json:"step"`
	StepAt    time.Time `json:"step_at"`
	NextAt    time.Time `json:"next_at"`
	Done      bool      `json:"done,omitempty"`
	Stopped   bool      `json:"stopped,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Note      string    `json:"note,omitempty"`
	StartedAt time.Time `json:"started_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Concurrency is the concurrency of the current step.
func (s *State) Concurrency() int { return s.Steps[s.Step] }

// Active reports whether the ramp still runs.
func (s *State) Active() bool { return !s.Done && !s.Stopped }

// Doc is the keel_meta document of taskType's ramp.
func Doc(taskType string) string { return "ramp:" + taskType }

// Decode reads a stored ramp document into v (a *State, or the public
// keel.RampState) and checks that its step is one of its steps.
func Decode(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	var st struct {
		Steps []int `json:"steps"`
		Step  int   `json:"step"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	if len(st.Steps) == 0 || st.Step < 0 || st.Step >= len(st.Steps) {
		return fmt.Errorf("step %d of %d", st.Step, len(st.Steps))
	}
	return nil
}

// Store is what a Judge needs of a driver for the ramps themselves: their
// documents and the attempts that ended, by minute.
type Store interface {
	GetMeta(ctx context.Context, name string) ([]byte, error)
	PutMeta(ctx context.Context, name string, value []byte, now time.Time) error
	Minutes(ctx context.Context, since time.Time) ([]driver.MinuteRow, error)
}

// Settings is what a Judge needs of a driver's runtime settings: a ramp
// sets its type's concurrency, so every ramp's type has a setting.
type Settings interface {
	ListSettings(ctx context.Context) ([]driver.Setting, error)
	PatchSetting(ctx context.Context, patch driver.SettingPatch) (*driver.Setting, error)
}

// Config wires a Judge.
type Config struct {
	Driver   Store
	Settings Settings
	// Interval is how often the leader judges the ramps due.
	Interval time.Duration
	// Clock paces the passes; default Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// Leading gates the loop: only the elected leader judges ramps.
	Leading func() bool
	// Applied is told about every setting a step wrote, so this process
	// applies it at once rather than at its next settings read. Nil: no
	// one is.
	Applied func(s driver.Setting)
	// Wrap turns a driver's error into the error the API's calls return
	// (the client marks an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error
}

// Judge is the ramp service.
type Judge struct {
	cfg  Config
	clk  service.Clock
	loop *service.Loop
}

// New returns a Judge.
func New(cfg Config) *Judge {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Wrap == nil {
		cfg.Wrap = func(_ context.Context, err error) error { return err }
	}
	return &Judge{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now)}
}

// Start judges the ramps due at once, then every Interval, each while
// leading.
func (j *Judge) Start(ctx context.Context) {
	j.loop = service.Start(ctx, func(ctx context.Context) {
		service.EveryOn(ctx, j.clk, j.cfg.Interval, func(ctx context.Context) {
			if !j.cfg.Leading() {
				return
			}
			if err := j.RunOnce(ctx); err != nil && ctx.Err() == nil {
				j.cfg.Logger.Warn("keel: evaluating the ramps failed; next try in one interval", "error", err)
			}
		})
	})
}

// Stop stops the service.
func (j *Judge) Stop() { j.loop.Stop() }

// RunOnce judges every active ramp whose step is due.
func (j *Judge) RunOnce(ctx context.Context) error {
	settings, err := j.cfg.Settings.ListSettings(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range settings {
		if s.Kind != driver.SettingType {
			continue
		}
		st, err := j.load(ctx, s.Name)
		if err == nil && st != nil {
			err = j.judge(ctx, st)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// load returns taskType's ramp; nil when it never had one.
func (j *Judge) load(ctx context.Context, taskType string) (*State, error) {
	b, err := j.cfg.Driver.GetMeta(ctx, Doc(taskType))
	if err != nil {
		return nil, fmt.Errorf("get ramp of %s: %w", taskType, err)
	}
	if b == nil {
		return nil, nil
	}
	var st State
	if err := Decode(b, &st); err != nil {
		return nil, fmt.Errorf("read ramp of %s: %w", taskType, err)
	}
	return &st, nil
}

// Put stores doc (a *State, or the public keel.RampState) as taskType's
// ramp. The error is the driver's, or the encoder's.
func (j *Judge) Put(ctx context.Context, taskType string, doc any) error {
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	return j.cfg.Driver.PutMeta(ctx, Doc(taskType), b, j.clk.Now())
}

// SetStep sets taskType's concurrency to n, a ramp's step, and tells
// Config.Applied. The error is the driver's.
func (j *Judge) SetStep(ctx context.Context, taskType string, n int) error {
	s, err := j.cfg.Settings.PatchSetting(ctx, driver.SettingPatch{Kind: driver.SettingType, Name: taskType, Concurrency: &n, Now: j.clk.Now()})
	if err != nil {
		return err
	}
	if j.cfg.Applied != nil {
		j.cfg.Applied(*s)
	}
	return nil
}

// judge advances, stops or keeps waiting one ramp.
func (j *Judge) judge(ctx context.Context, st *State) error {
	now := j.clk.Now()
	if !st.Active() || now.Before(st.NextAt) {
		return nil
	}
	// The attempts that ended in the whole minutes after the step's
	// minute: the history counts by minute, and the step's own minute
	// holds attempts of the step before, which would water the judgement
	// down. So every attempt judged ended at the step's concurrency.
	first := driver.DueMinute(st.StepAt) + 1
	rows, err := j.cfg.Driver.Minutes(ctx, time.Unix(first*60, 0))
	if err != nil {
		return fmt.Errorf("ramp of %s: read history: %w", st.Type, err)
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
		j.cfg.Logger.Error("keel: ramp stopped", "type", st.Type, "reason", st.Reason)
	default:
		st.Step++
		st.StepAt, st.NextAt, st.Note = now, now.Add(st.Every), ""
		st.Done = st.Step == len(st.Steps)-1
		if err := j.SetStep(ctx, st.Type, st.Concurrency()); err != nil {
			return fmt.Errorf("ramp %s to concurrency %d: %w", st.Type, st.Concurrency(), err)
		}
		j.cfg.Logger.Info("keel: ramp advanced", "type", st.Type, "concurrency", st.Concurrency(),
			"failed", failed, "attempts", ended)
	}
	if err := j.Put(ctx, st.Type, st); err != nil {
		return fmt.Errorf("store ramp of %s: %w", st.Type, err)
	}
	return nil
}
