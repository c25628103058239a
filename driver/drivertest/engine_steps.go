package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// testEngineSteps: a handler's finished steps are not run again by a later
// attempt (here after a manual requeue of the dead task), which gets their
// stored results back; a failed step stores nothing; a name repeated in
// one attempt returns the stored result; Get shows the steps.
func testEngineSteps(t *testing.T, e *env) {
	type out struct {
		Rows []int `json:"rows"`
	}
	var runs [3]atomic.Int32
	var attempts atomic.Int32
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		attempt := attempts.Add(1)
		a, err := keel.Step(ctx, "fetch", func(ctx context.Context) (out, error) {
			runs[0].Add(1)
			return out{Rows: []int{1, 2, task.Args.N}}, nil
		})
		if err != nil {
			return err
		}
		again, err := keel.Step(ctx, "fetch", func(ctx context.Context) (out, error) {
			return out{}, errors.New("a stored step ran again")
		})
		if err != nil || fmt.Sprint(again) != fmt.Sprint(a) {
			return keel.Permanent(fmt.Errorf("repeated step: %v, %v", again, err))
		}
		sum, err := keel.Step(ctx, "sum", func(ctx context.Context) (int, error) {
			runs[1].Add(1)
			return a.Rows[0] + a.Rows[1] + a.Rows[2], nil
		})
		if err != nil {
			return err
		}
		_, err = keel.Step(ctx, "send", func(ctx context.Context) (string, error) {
			runs[2].Add(1)
			if attempt == 1 {
				return "", errors.New("downstream refused")
			}
			return "sent", nil
		})
		if err != nil {
			return keel.Permanent(err)
		}
		return task.SetResult(sum)
	})
	info := e.enqueue(c, 7)
	row := e.waitState(info.ID, driver.StateDead)
	if len(row.Steps) != 2 || row.Steps[0].Name != "fetch" || row.Steps[1].Name != "sum" ||
		!jsonEqual(row.Steps[0].Result, []byte(`{"rows":[1,2,7]}`)) || !jsonEqual(row.Steps[1].Result, []byte(`10`)) {
		t.Fatalf("steps after the failed attempt: %+v", row.Steps)
	}
	e.clock.Advance(time.Second) // steps are ordered by time (then name)
	if _, err := c.Retry(e.ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	row = e.waitState(info.ID, driver.StateSucceeded)
	if !jsonEqual(row.Result, []byte(`10`)) {
		t.Fatalf("result %s, want 10 (from the stored steps)", row.Result)
	}
	if a, b, s := runs[0].Load(), runs[1].Load(), runs[2].Load(); a != 1 || b != 1 || s != 2 {
		t.Fatalf("step runs fetch %d, sum %d, send %d; want 1, 1, 2", a, b, s)
	}
	got, err := c.Get(e.ctx, info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Steps) != 3 || got.Steps[2].Name != "send" || got.Steps[2].Attempt != 1 || got.Steps[0].Attempt != 1 ||
		!jsonEqual(got.Steps[2].Result, []byte(`"sent"`)) {
		t.Fatalf("Get's steps: %+v", got.Steps)
	}
}

// testEngineStepLeaseLost: a step of a task the worker no longer holds
// (cancelled by another process) is refused with ErrLeaseLost and stores
// nothing; Step outside a handler and with a bad name fails at once.
func testEngineStepLeaseLost(t *testing.T, e *env) {
	if _, err := keel.Step(e.ctx, "s", func(ctx context.Context) (int, error) { return 1, nil }); !errors.Is(err, keel.ErrNotInHandler) {
		t.Fatalf("step outside a handler: %v, want ErrNotInHandler", err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	errs := make(chan error, 3)
	c := e.worker(keel.Config{}, func(ctx context.Context, task *keel.Task[args]) error {
		var called atomic.Bool
		_, err := keel.Step(ctx, "bad\"name", func(ctx context.Context) (int, error) { called.Store(true); return 1, nil })
		if called.Load() {
			err = errors.New("fn called for a bad name")
		}
		errs <- err
		if _, err := keel.Step(ctx, "one", func(ctx context.Context) (int, error) { return 1, nil }); err != nil {
			return err
		}
		close(started)
		<-release
		_, err = keel.Step(ctx, "two", func(ctx context.Context) (int, error) { return 2, nil })
		errs <- err
		return err
	})
	info := e.enqueue(c, 1)
	if err := <-errs; !errors.Is(err, keel.ErrInvalid) {
		t.Fatalf("bad step name: %v, want ErrInvalid", err)
	}
	<-started
	if _, err := e.enqueuer().Cancel(e.ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-errs; !errors.Is(err, keel.ErrLeaseLost) {
		t.Fatalf("step after the task was cancelled elsewhere: %v, want ErrLeaseLost", err)
	}
	row := e.get(info.ID)
	if row.State != driver.StateCancelled || len(row.Steps) != 1 || row.Steps[0].Name != "one" {
		t.Fatalf("task %s with steps %+v, want cancelled with step one only", row.State, row.Steps)
	}
}
