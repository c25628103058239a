package driver

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxStepName is the longest step name, in bytes.
const MaxStepName = 200

// MaxStepDepth is the deepest nesting of a step's result: the steps
// document holds it two levels down (name, then result), and MariaDB
// refuses JSON nested 32 levels deep.
const MaxStepDepth = 29

// MaxStepsBytes bounds the stored results of one task's steps, summed:
// one result may not exceed it, and keel refuses a step whose result
// would take the task's steps past it (the same bound as a payload's
// default, 1 MiB).
const MaxStepsBytes = 1 << 20

// StepTimeLayout is how a step's time is stored in the steps column: UTC,
// microseconds, the same text on every database.
const StepTimeLayout = "2006-01-02T15:04:05.000000Z"

// StepParams stores the result of one durable step of a running task
// (Driver.SaveStep). The write applies only while the task is running with
// the claim's fencing token Fence and, when Owner is set, under Owner: a
// stale worker's step is rejected like its completion. A step already
// stored under Name is replaced.
type StepParams struct {
	ID    int64
	Fence int64
	// Owner is the lease holder; empty (an HTTP target posting through
	// the API, which knows the fence but not the node) fences by Fence
	// alone, which is unique per claim.
	Owner string
	// Name names the step (see ValidateStepName).
	Name string
	// Result is the step's result: valid JSON of at most MaxStepsBytes.
	Result []byte
	// Now is the step's time (the database's clock for a driver that
	// uses it).
	Now time.Time
}

// Validate rejects params SaveStep cannot take; drivers call it before
// running any SQL.
func (p StepParams) Validate() error {
	switch {
	case p.ID <= 0:
		return fmt.Errorf("task id must be positive, got %d", p.ID)
	case p.Fence <= 0:
		return fmt.Errorf("fence must be positive, got %d", p.Fence)
	case p.Now.IsZero():
		return errors.New("now is required")
	}
	if err := ValidateStepName(p.Name); err != nil {
		return err
	}
	switch {
	case len(p.Result) == 0:
		return errors.New("step result is required (JSON; null for none)")
	case len(p.Result) > MaxStepsBytes:
		return fmt.Errorf("step result is %d bytes, more than the limit of %d", len(p.Result), MaxStepsBytes)
	case !json.Valid(p.Result):
		return errors.New("step result is not valid JSON")
	}
	return nil
}

// ValidateStepName rejects a step name that is empty, longer than
// MaxStepName bytes, not valid UTF-8, or holds a control character, a
// double quote or a backslash (the drivers address a step by name in a
// JSON path).
func ValidateStepName(name string) error {
	switch {
	case name == "":
		return errors.New("step name is required")
	case len(name) > MaxStepName:
		return fmt.Errorf("step name is %d bytes, more than %d", len(name), MaxStepName)
	case !utf8.ValidString(name):
		return errors.New("step name is not valid UTF-8")
	case strings.ContainsAny(name, `"\`):
		return errors.New(`step name may not contain " or \`)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return errors.New("step name may not contain control characters")
	}
	return nil
}

// StepRow is one stored step of a task (TaskRow.Steps).
type StepRow struct {
	Name string
	// Result is the step's JSON result, as the database returns it (the
	// same value; PostgreSQL and MySQL may change its spacing and key
	// order).
	Result []byte
	// At is when the step was stored; Attempt the task's attempt that
	// stored it.
	At      time.Time
	Attempt int
}

// StepsSize is the stored size of steps' results, summed: what
// MaxStepsBytes bounds.
func StepsSize(steps []StepRow) int {
	n := 0
	for _, s := range steps {
		n += len(s.Result)
	}
	return n
}

// storedStep is one step in the steps column: the column is a JSON object
// of step name to storedStep.
type storedStep struct {
	Result  json.RawMessage `json:"result"`
	At      string          `json:"at"`
	Attempt int             `json:"attempt"`
}

// DecodeSteps decodes a steps column (a JSON object of name to
// {"result", "at", "attempt"}; empty or null: no steps) into rows ordered
// by time, then name.
func DecodeSteps(b []byte) ([]StepRow, error) {
	if len(b) == 0 || string(b) == "null" || string(b) == "{}" {
		return nil, nil
	}
	var m map[string]storedStep
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode steps: %w", err)
	}
	out := make([]StepRow, 0, len(m))
	for name, s := range m {
		at, err := time.Parse(time.RFC3339Nano, s.At)
		if err != nil {
			return nil, fmt.Errorf("decode step %q: time: %w", name, err)
		}
		out = append(out, StepRow{Name: name, Result: s.Result, At: at.UTC(), Attempt: s.Attempt})
	}
	slices.SortFunc(out, func(a, b StepRow) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out, nil
}
