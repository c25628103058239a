package steps_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/steps"
)

var (
	_  steps.Store = driver.Driver(nil) // the real drivers fit
	t0             = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
)

// attempt is a fake Attempt: stored results by name; err fails both calls.
type attempt struct {
	stored map[string][]byte
	err    error
	saves  int
}

func (a *attempt) Stored(_ context.Context, name string) ([]byte, bool, error) {
	if a.err != nil {
		return nil, false, a.err
	}
	r, ok := a.stored[name]
	return r, ok, nil
}

func (a *attempt) Save(_ context.Context, name string, result []byte) error {
	if a.err != nil {
		return a.err
	}
	a.saves++
	a.stored[name] = result
	return nil
}

func TestRunStoresAndReplays(t *testing.T) {
	a := &attempt{stored: map[string][]byte{}}
	calls := 0
	fn := func(context.Context) (map[string]int, error) { calls++; return map[string]int{"n": calls}, nil }
	for range 2 {
		v, err := steps.Run(t.Context(), a, "count", fn)
		if err != nil || v["n"] != 1 {
			t.Fatalf("Run: %v, %v; want n=1", v, err)
		}
	}
	if calls != 1 || a.saves != 1 || string(a.stored["count"]) != `{"n":1}` {
		t.Fatalf("fn ran %d times, %d saves, stored %s", calls, a.saves, a.stored["count"])
	}
}

func TestRunFailureStoresNothing(t *testing.T) {
	a := &attempt{stored: map[string][]byte{}}
	boom := errors.New("boom")
	if _, err := steps.Run(t.Context(), a, "s", func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("Run: %v, want boom", err)
	}
	if a.saves != 0 {
		t.Fatalf("%d saves after a failed step", a.saves)
	}
	down := errors.New("store down")
	a.err = down
	if _, err := steps.Run(t.Context(), a, "s", func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, down) {
		t.Fatalf("Run with a failing store: %v", err)
	}
}

func TestRunDecodeError(t *testing.T) {
	a := &attempt{stored: map[string][]byte{"s": []byte(`"text"`)}}
	_, err := steps.Run(t.Context(), a, "s", func(context.Context) (int, error) { return 1, nil })
	if err == nil || !strings.Contains(err.Error(), `step "s": decode its stored result into int`) {
		t.Fatalf("Run: %v", err)
	}
}

func TestRunBadInput(t *testing.T) {
	one := func(context.Context) (any, error) { return 1, nil }
	for _, tc := range []struct {
		name, step string
		fn         func(context.Context) (any, error)
		want       string
	}{
		{"empty name", "", one, `step "": step name is required`},
		{"quote", `a"b`, one, `may not contain " or \`},
		{"control", "a\nb", one, "control characters"},
		{"bad UTF-8", "a\xffb", one, "not valid UTF-8"},
		{"long name", strings.Repeat("s", driver.MaxStepName+1), one, "more than 200"},
		{"nil fn", "s", nil, `step "s": nil function`},
		{"chan result", "s", func(context.Context) (any, error) { return make(chan int), nil }, "cannot be encoded as JSON"},
		{"NUL", "s", func(context.Context) (any, error) { return "a\x00b", nil }, `step "s": `},
		{"too deep", "s", func(context.Context) (any, error) {
			return json.RawMessage(strings.Repeat("[", 30) + strings.Repeat("]", 30)), nil
		}, "nested deeper than 29 levels"},
	} {
		a := &attempt{stored: map[string][]byte{}}
		_, err := steps.Run(t.Context(), a, tc.step, tc.fn)
		if !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", tc.name, err, tc.want)
		}
		if a.saves != 0 {
			t.Errorf("%s: stored", tc.name)
		}
	}
}

// store is a fake driver holding one task.
type store struct {
	row   *driver.TaskRow
	saved []driver.StepParams
	stale bool // SaveStep answers not applied
}

func (s *store) Get(_ context.Context, id int64) (*driver.TaskRow, error) {
	if s.row == nil || s.row.ID != id {
		return nil, driver.ErrNotFound
	}
	return s.row, nil
}

func (s *store) SaveStep(_ context.Context, p driver.StepParams) (bool, error) {
	if s.stale {
		return false, nil
	}
	s.saved = append(s.saved, p)
	return true, nil
}

func TestSave(t *testing.T) {
	running := func() *driver.TaskRow {
		return &driver.TaskRow{ID: 7, State: driver.StateRunning, Fence: 3,
			Steps: []driver.StepRow{{Name: "big", Result: []byte(`"` + strings.Repeat("x", 700<<10) + `"`)}}}
	}
	big := []byte(`"` + strings.Repeat("y", 400<<10) + `"`)
	for _, tc := range []struct {
		name   string
		row    *driver.TaskRow
		stale  bool
		id     int64
		fence  int64
		step   string
		result string
		want   error
		text   string
	}{
		{"id 0", running(), false, 0, 3, "s", `1`, kerr.ErrInvalid, "task id must be positive, got 0"},
		{"fence 0", running(), false, 7, 0, "s", `1`, kerr.ErrInvalid, "fence must be positive, got 0"},
		{"bad name", running(), false, 7, 3, `a\b`, `1`, kerr.ErrInvalid, `may not contain " or \`},
		{"no result", running(), false, 7, 3, "s", ``, kerr.ErrInvalid, "result is required (JSON; null for none)"},
		{"invalid JSON", running(), false, 7, 3, "s", `{"a":`, kerr.ErrInvalid, "result is not valid JSON"},
		{"too deep", running(), false, 7, 3, "s", strings.Repeat("[", 30) + strings.Repeat("]", 30), kerr.ErrInvalid, "nested deeper"},
		{"unknown task", running(), false, 8, 3, "s", `1`, driver.ErrNotFound, ""},
		{"pending task", &driver.TaskRow{ID: 7, State: driver.StatePending, Fence: 3}, false, 7, 3, "s", `1`,
			driver.ErrWrongState, `save step "s" of task 7: the task is pending, not running`},
		{"other fence", running(), false, 7, 4, "s", `1`, engine.ErrLeaseLost, "fence 4 is not the running claim's (3)"},
		{"too large", running(), false, 7, 3, "s", string(big), engine.ErrStepsTooLarge, ""},
		{"lost meanwhile", running(), true, 7, 3, "s", `1`, engine.ErrLeaseLost, `save step "s" of task 7: `},
		{"good", running(), false, 7, 3, "s", `1`, nil, ""},
		{"replacing counts the new size", running(), false, 7, 3, "big", string(big), nil, ""},
	} {
		s := &store{row: tc.row, stale: tc.stale}
		err := steps.Save(t.Context(), s, tc.id, tc.fence, tc.step, []byte(tc.result), t0)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.text)) {
			t.Errorf("%s: %v, want %v with %q", tc.name, err, tc.want, tc.text)
			continue
		}
		if tc.want != nil && len(s.saved) != 0 {
			t.Errorf("%s: stored %+v", tc.name, s.saved)
		}
		if tc.want == nil {
			p := driver.StepParams{ID: 7, Fence: 3, Name: tc.step, Result: []byte(tc.result), Now: t0}
			if len(s.saved) != 1 || s.saved[0].Name != p.Name || s.saved[0].Fence != p.Fence || !s.saved[0].Now.Equal(t0) {
				t.Errorf("%s: stored %+v", tc.name, s.saved)
			}
		}
	}
}
