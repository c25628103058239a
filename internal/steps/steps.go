// Package steps runs and stores a task's durable steps: keel.Step inside
// a handler, through the running attempt's view of its task's steps, and
// Client.SaveStep for a worker outside the process, fenced by the claim
// it holds. It checks step names and results the same way for both.
package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/kerr"
)

// Attempt is the running attempt's view of its task's steps.
type Attempt interface {
	// Stored returns the stored result of step name, and whether there
	// is one.
	Stored(ctx context.Context, name string) (result []byte, found bool, err error)
	// Save stores result as step name, fenced by the attempt's claim.
	Save(ctx context.Context, name string, result []byte) error
}

// Handler is the Attempt of the handler whose ctx is passed: the engine's
// steps of the attempt it runs.
var Handler Attempt = handlerAttempt{}

type handlerAttempt struct{}

func (handlerAttempt) Stored(ctx context.Context, name string) ([]byte, bool, error) {
	result, found, _, err := engine.StoredStep(ctx, name)
	return result, found, err
}

func (handlerAttempt) Save(ctx context.Context, name string, result []byte) error {
	_, err := engine.SaveStep(ctx, name, result)
	return err
}

// Run is keel.Step once it knows it runs in a handler: it returns step
// name's stored result decoded into T, or calls fn and stores what it
// returns. A bad name, a nil fn or a result no database would store is a
// kerr.ErrInvalid error, and fn is not called or nothing is stored.
func Run[T any](ctx context.Context, a Attempt, name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if err := driver.ValidateStepName(name); err != nil {
		return zero, kerr.Invalid("step %q: %v", name, err)
	}
	if fn == nil {
		return zero, kerr.Invalid("step %q: nil function", name)
	}
	stored, found, err := a.Stored(ctx, name)
	if err != nil {
		return zero, driver.Unavailable(ctx, err, nil)
	}
	if found {
		var v T
		if err := json.Unmarshal(stored, &v); err != nil {
			return zero, fmt.Errorf("step %q: decode its stored result into %T: %w", name, v, err)
		}
		return v, nil
	}
	v, err := fn(ctx)
	if err != nil {
		return v, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return zero, kerr.Invalid("step %q: result cannot be encoded as JSON: %v", name, err)
	}
	if err := checkResult(b); err != nil {
		return zero, kerr.Invalid("step %q: %v", name, err)
	}
	if err := a.Save(ctx, name, b); err != nil {
		return zero, driver.Unavailable(ctx, err, nil)
	}
	return v, nil
}

// Store is what Save needs of a driver.
type Store interface {
	Get(ctx context.Context, id int64) (*driver.TaskRow, error)
	SaveStep(ctx context.Context, p driver.StepParams) (bool, error)
}

// Save stores result as step name of task id for a worker that holds the
// task's claim with fencing token fence (Client.SaveStep), at now. Bad
// input is a kerr.ErrInvalid error; a task that is not running wraps
// driver.ErrWrongState, another claim engine.ErrLeaseLost, and results
// past driver.MaxStepsBytes engine.ErrStepsTooLarge. Nothing is stored
// then.
func Save(ctx context.Context, s Store, id, fence int64, name string, result []byte, now time.Time) error {
	switch {
	case id <= 0:
		return kerr.Invalid("task id must be positive, got %d", id)
	case fence <= 0:
		return kerr.Invalid("fence must be positive, got %d", fence)
	}
	if err := driver.ValidateStepName(name); err != nil {
		return kerr.Invalid("step %q: %v", name, err)
	}
	switch {
	case len(result) == 0:
		return kerr.Invalid("step %q: result is required (JSON; null for none)", name)
	case !json.Valid(result):
		return kerr.Invalid("step %q: result is not valid JSON", name)
	}
	if err := checkResult(result); err != nil {
		return kerr.Invalid("step %q: %v", name, err)
	}
	row, err := s.Get(ctx, id)
	if err != nil {
		return driver.Unavailable(ctx, err, nil)
	}
	switch {
	case row.State != driver.StateRunning:
		return fmt.Errorf("save step %q of task %d: the task is %s, not running: %w", name, id, row.State, driver.ErrWrongState)
	case row.Fence != fence:
		return fmt.Errorf("save step %q of task %d: fence %d is not the running claim's (%d): %w",
			name, id, fence, row.Fence, engine.ErrLeaseLost)
	}
	size := driver.StepsSize(row.Steps) + len(result)
	for _, st := range row.Steps {
		if st.Name == name {
			size -= len(st.Result)
		}
	}
	if size > driver.MaxStepsBytes {
		return fmt.Errorf("save step %q of task %d: %w (result of %d bytes)", name, id, engine.ErrStepsTooLarge, len(result))
	}
	applied, err := s.SaveStep(ctx, driver.StepParams{ID: id, Fence: fence, Name: name, Result: result, Now: now})
	if err != nil {
		return driver.Unavailable(ctx, fmt.Errorf("save step %q of task %d: %w", name, id, err), nil)
	}
	if !applied {
		return fmt.Errorf("save step %q of task %d: %w", name, id, engine.ErrLeaseLost)
	}
	return nil
}

// checkResult refuses a step result, valid JSON, that some database
// would refuse or store changed: the checks of a payload, and nesting
// deeper than driver.MaxStepDepth.
func checkResult(result []byte) error {
	if digest.Depth(result) > driver.MaxStepDepth {
		return fmt.Errorf("result is nested deeper than %d levels", driver.MaxStepDepth)
	}
	return digest.Check("result", result)
}
