package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/keelq/keel/driver"
)

// ErrStepsTooLarge: a step's result would take the task's stored steps
// past driver.MaxStepsBytes.
var ErrStepsTooLarge = errors.New("keel: the task's step results would exceed 1 MiB")

// steps is one attempt's view of its task's stored steps, loaded on the
// first step of the attempt.
type steps struct {
	mu     sync.Mutex
	loaded bool
	byName map[string][]byte
	size   int
}

// load reads the task's stored steps once per attempt. A task on its
// first claim (Fence 1) cannot have any: a step is stored only under the
// claim that ran it, so the claim stays as cheap as before and only a
// retried, rescued or requeued task pays one read. Called with s.mu held.
func (s *steps) load(ctx context.Context, ex *execution) error {
	if s.loaded {
		return nil
	}
	s.byName = map[string][]byte{}
	if ex.row.Fence > 1 {
		row, err := ex.e.drv.Get(ctx, ex.row.ID)
		if err != nil {
			return fmt.Errorf("load steps of task %d: %w", ex.row.ID, err)
		}
		if row.State != driver.StateRunning || row.Fence != ex.row.Fence {
			return fmt.Errorf("load steps of task %d: %w", ex.row.ID, ErrLeaseLost)
		}
		for _, st := range row.Steps {
			s.byName[st.Name] = st.Result
			s.size += len(st.Result)
		}
	}
	s.loaded = true
	return nil
}

// StoredStep returns the stored result of step name of the task whose
// handler ctx belongs to, and whether there is one. inHandler is false,
// and nothing is done, when ctx is not a handler's context.
func StoredStep(ctx context.Context, name string) (result []byte, found, inHandler bool, err error) {
	ex, _ := ctx.Value(execKey{}).(*execution)
	if ex == nil {
		return nil, false, false, nil
	}
	ex.steps.mu.Lock()
	defer ex.steps.mu.Unlock()
	if err := ex.steps.load(ctx, ex); err != nil {
		return nil, false, true, err
	}
	result, found = ex.steps.byName[name]
	return result, found, true, nil
}

// SaveStep stores result as step name of the task whose handler ctx
// belongs to, fenced by the attempt's claim. The error wraps ErrLeaseLost
// when the task is no longer held by this worker (nothing is stored, and
// nothing else is cancelled: the heartbeat finds out too), and
// ErrStepsTooLarge when the task's steps would grow past
// driver.MaxStepsBytes. inHandler is false, and nothing is done, when ctx
// is not a handler's context.
func SaveStep(ctx context.Context, name string, result []byte) (inHandler bool, err error) {
	ex, _ := ctx.Value(execKey{}).(*execution)
	if ex == nil {
		return false, nil
	}
	e := ex.e
	ex.steps.mu.Lock()
	defer ex.steps.mu.Unlock()
	if err := ex.steps.load(ctx, ex); err != nil {
		return true, err
	}
	size := ex.steps.size - len(ex.steps.byName[name]) + len(result)
	if size > driver.MaxStepsBytes {
		return true, fmt.Errorf("save step %q of task %d: %w (result of %d bytes)", name, ex.row.ID, ErrStepsTooLarge, len(result))
	}
	applied, err := e.drv.SaveStep(ctx, driver.StepParams{ID: ex.row.ID, Fence: ex.row.Fence, Owner: e.cfg.Node,
		Name: name, Result: result, Now: e.cfg.Now()})
	if err != nil {
		return true, fmt.Errorf("save step %q of task %d: %w", name, ex.row.ID, err)
	}
	if !applied {
		return true, fmt.Errorf("save step %q of task %d: %w", name, ex.row.ID, ErrLeaseLost)
	}
	ex.steps.byName[name] = result
	ex.steps.size = size
	return true, nil
}
