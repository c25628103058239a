package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
)

// The API's calls on stored schedules. Each refuses an invalid name
// (kerr.ErrInvalid), answers driver.ErrNotFound for an unknown one, and
// passes any other driver error through Config.Wrap.

// List returns the stored schedules by name.
func (s *Scheduler) List(ctx context.Context) ([]driver.ScheduleRow, error) {
	rows, err := s.cfg.Driver.ListSchedules(ctx)
	if err != nil {
		return nil, fmt.Errorf("keel: list schedules: %w", s.cfg.Wrap(ctx, err))
	}
	return rows, nil
}

// Get returns schedule name.
func (s *Scheduler) Get(ctx context.Context, name string) (*driver.ScheduleRow, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	row, err := s.cfg.Driver.GetSchedule(ctx, name)
	return row, s.failed(ctx, err, name, "get schedule")
}

// Pause pauses (or, paused false, resumes) schedule name as of now and
// returns it as stored.
func (s *Scheduler) Pause(ctx context.Context, name string, paused bool, now time.Time) (*driver.ScheduleRow, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	row, err := s.cfg.Driver.PauseSchedule(ctx, driver.PauseScheduleParams{Name: name, Paused: paused, Now: now})
	return row, s.failed(ctx, err, name, "pause schedule")
}

// Delete deletes schedule name; the tasks it enqueued stay.
func (s *Scheduler) Delete(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	return s.failed(ctx, s.cfg.Driver.DeleteSchedule(ctx, name), name, "delete schedule")
}

// Trigger inserts one task of schedule name now, also while it is paused,
// under a manual key (ManualKey), and tells Config.Enqueued. The
// schedule's ticks are not moved.
func (s *Scheduler) Trigger(ctx context.Context, name string) (*driver.InsertResult, error) {
	row, err := s.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	now := s.clk.Now()
	task, err := s.cfg.Task(ctx, row, ManualKey(row.Name, now), map[string]string{MetaSchedule: row.Name, MetaTrigger: "manual"}, now)
	if err != nil {
		return nil, err
	}
	res, err := s.cfg.Driver.Insert(ctx, []driver.InsertParams{*task})
	if err != nil {
		return nil, fmt.Errorf("keel: trigger schedule %s: %w", row.Name, s.cfg.Wrap(ctx, err))
	}
	if s.cfg.Enqueued != nil {
		s.cfg.Enqueued(row.Name, &res[0])
	}
	return &res[0], nil
}

// checkName refuses an invalid schedule name.
func checkName(name string) error {
	if !driver.ValidScheduleName(name) {
		return kerr.Invalid("invalid schedule name %q", name)
	}
	return nil
}

// failed returns nil for a nil err, the not-found error of schedule name
// for the driver's ErrNotFound, else err wrapped as doing failed.
func (s *Scheduler) failed(ctx context.Context, err error, name, doing string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, driver.ErrNotFound):
		return fmt.Errorf("%w: no schedule %q", driver.ErrNotFound, name)
	}
	return fmt.Errorf("keel: %s: %w", doing, s.cfg.Wrap(ctx, err))
}
