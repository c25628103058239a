package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/scheduler"
	"github.com/keelq/keel/internal/service/servicetest"
)

// The fake store's side of the API's calls: rows by name, apiErr for all.

func (s *store) find(name string) (*driver.ScheduleRow, error) {
	if s.apiErr != nil {
		return nil, s.apiErr
	}
	for i := range s.rows {
		if s.rows[i].Name == name {
			return &s.rows[i], nil
		}
	}
	return nil, driver.ErrNotFound
}

func (s *store) GetSchedule(_ context.Context, name string) (*driver.ScheduleRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.find(name)
	if err != nil {
		return nil, err
	}
	c := *r
	return &c, nil
}

func (s *store) PauseSchedule(_ context.Context, p driver.PauseScheduleParams) (*driver.ScheduleRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.find(p.Name)
	if err != nil {
		return nil, err
	}
	r.Paused, r.UpdatedAt = p.Paused, p.Now
	c := *r
	return &c, nil
}

func (s *store) DeleteSchedule(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.find(name); err != nil {
		return err
	}
	for i := range s.rows {
		if s.rows[i].Name == name {
			s.rows = append(s.rows[:i], s.rows[i+1:]...)
			break
		}
	}
	return nil
}

func (s *store) Insert(_ context.Context, ps []driver.InsertParams) ([]driver.InsertResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.apiErr != nil {
		return nil, s.apiErr
	}
	s.inserted = append(s.inserted, ps...)
	s.nextID++
	return []driver.InsertResult{{Task: &driver.TaskRow{ID: s.nextID, Type: ps[0].Type, Queue: ps[0].Queue, IdemKey: ps[0].IdemKey}}}, nil
}

// TestAPINames: every call refuses an invalid name with ErrInvalid and
// answers ErrNotFound, naming the schedule, for an unknown one.
func TestAPINames(t *testing.T) {
	t.Parallel()
	s := scheduler.New(setup(t, every("m")).cfg)
	ctx := context.Background()
	calls := map[string]func(name string) error{
		"get": func(name string) error {
			_, err := s.Get(ctx, name)
			return err
		},
		"pause": func(name string) error {
			_, err := s.Pause(ctx, name, true, t0)
			return err
		},
		"delete": func(name string) error { return s.Delete(ctx, name) },
		"trigger": func(name string) error {
			_, err := s.Trigger(ctx, name)
			return err
		},
	}
	for call, f := range calls {
		if err := f("a b"); !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), `invalid schedule name "a b"`) {
			t.Errorf("%s of an invalid name: %v", call, err)
		}
		if err := f("nope"); !errors.Is(err, driver.ErrNotFound) || !strings.Contains(err.Error(), `no schedule "nope"`) {
			t.Errorf("%s of an unknown name: %v", call, err)
		}
	}
}

// TestAPIDriverErrors: a driver's error goes through Wrap, saying what
// failed.
func TestAPIDriverErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, every("m"))
	down := errors.New("connection refused")
	b.drv.apiErr, b.drv.listErr = down, down
	wrapped := errors.New("unavailable")
	b.cfg.Wrap = func(_ context.Context, err error) error { return errors.Join(wrapped, err) }
	s := scheduler.New(b.cfg)
	ctx := context.Background()
	_, getErr := s.Get(ctx, "m")
	_, pauseErr := s.Pause(ctx, "m", true, t0)
	_, listErr := s.List(ctx)
	for want, err := range map[string]error{
		"keel: get schedule: ": getErr, "keel: pause schedule: ": pauseErr,
		"keel: delete schedule: ": s.Delete(ctx, "m"), "keel: list schedules: ": listErr,
	} {
		if !errors.Is(err, wrapped) || !errors.Is(err, down) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v", want, err)
		}
	}
}

// TestAPIPauseAndDelete: pause and resume write the flag as of now; a
// deleted schedule is gone.
func TestAPIPauseAndDelete(t *testing.T) {
	t.Parallel()
	b := setup(t, every("m"))
	s := scheduler.New(b.cfg)
	ctx := context.Background()
	at := t0.Add(time.Hour)
	if r, err := s.Pause(ctx, "m", true, at); err != nil || !r.Paused || !r.UpdatedAt.Equal(at) {
		t.Fatalf("pause: %+v %v", r, err)
	}
	if r, err := s.Pause(ctx, "m", false, at); err != nil || r.Paused {
		t.Fatalf("resume: %+v %v", r, err)
	}
	if err := s.Delete(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "m"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

// TestAPITrigger: a manual trigger inserts one task under a manual key
// with the trigger's meta, tells Enqueued, and moves no tick, also while
// the schedule is paused.
func TestAPITrigger(t *testing.T) {
	t.Parallel()
	b := setup(t, every("m", func(r *driver.ScheduleRow) { r.Paused = true }))
	s := scheduler.New(b.cfg)
	res, err := s.Trigger(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	if want := scheduler.ManualKey("m", t0); res.Task.IdemKey != want || want != "keel.schedule:m:manual:1930305600000000000" {
		t.Fatalf("key %q, want %q", res.Task.IdemKey, want)
	}
	if p := b.drv.inserted[0]; !strings.Contains(string(p.Meta), `"keel.trigger":"manual"`) || !p.Now.Equal(t0) {
		t.Fatalf("insert %+v", p)
	}
	if name := servicetest.Recv(t, b.enqueued); name != "m" {
		t.Fatalf("enqueued %q", name)
	}
	servicetest.None(t, b.drv.ticks)
	b.taskErr = errors.New("no such type")
	if _, err := scheduler.New(b.cfg).Trigger(context.Background(), "m"); !errors.Is(err, b.taskErr) {
		t.Fatalf("a task that cannot be built: %v", err)
	}
}
