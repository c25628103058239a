package keel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// TestStepBadInput: a bad step name, a nil function or a result that does
// not encode is refused with ErrInvalid before anything runs or is stored;
// a result that takes the task's steps past MaxStepsBytes is refused with
// ErrStepsTooLarge and stores nothing.
func TestStepBadInput(t *testing.T) {
	t.Parallel()
	var fnCalls atomic.Int32
	count := func(ctx context.Context) (int, error) { fnCalls.Add(1); return 1, nil }
	errs := make(chan map[string]error, 1)
	h := keel.NewHandlers()
	keel.Handle(h, "t.steps", func(ctx context.Context, task *keel.Task[struct{}]) error {
		got := map[string]error{}
		for name, bad := range map[string]string{
			"empty": "", "quote": `a"b`, "backslash": `a\b`, "newline": "a\nb", "NUL": "a\x00b",
			"bad UTF-8": "a\xffb", "too long": strings.Repeat("s", keel.MaxStepName+1),
		} {
			_, got[name] = keel.Step(ctx, bad, count)
		}
		_, got["nil fn"] = keel.Step[int](ctx, "nil", nil)
		_, got["chan result"] = keel.Step(ctx, "chan", func(ctx context.Context) (chan int, error) { return make(chan int), nil })
		// Results some database refuses.
		_, got["NUL result"] = keel.Step(ctx, "nul", func(ctx context.Context) (string, error) { return "a\x00b", nil })
		_, got["result nested 30 deep"] = keel.Step(ctx, "deep", func(ctx context.Context) (json.RawMessage, error) {
			return json.RawMessage(strings.Repeat("[", 30) + strings.Repeat("]", 30)), nil
		})
		big := strings.Repeat("x", 600<<10)
		big1 := func(ctx context.Context) (string, error) { return big, nil }
		if _, err := keel.Step(ctx, "big1", big1); err != nil {
			return keel.Permanent(err)
		}
		_, got["past 1 MiB"] = keel.Step(ctx, "big2", big1)
		// Replacing a step counts its new size, not both.
		_, got["same name again"] = keel.Step(ctx, "big1", big1)
		errs <- got
		return nil
	})
	c, drv := setup(t, func(cfg *keel.Config) { cfg.Handlers = h; cfg.PollInterval = 10 * time.Millisecond })
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) }) //nolint:errcheck // the test has its answer
	info, err := c.Enqueue(t.Context(), "t.steps", struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	got := <-errs
	for name, err := range got {
		want := keel.ErrInvalid
		switch name {
		case "past 1 MiB":
			want = keel.ErrStepsTooLarge
		case "same name again":
			want = nil
		}
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if n := fnCalls.Load(); n != 0 {
		t.Errorf("fn ran %d times for refused names", n)
	}
	row, err := drv.Get(t.Context(), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(row.Steps) != 1 || row.Steps[0].Name != "big1" {
		names := []string{}
		for _, s := range row.Steps {
			names = append(names, s.Name)
		}
		t.Fatalf("stored steps %v, want only big1", names)
	}
}

// TestSaveStepBadInput: Client.SaveStep (behind the API's step route)
// refuses bad input with ErrInvalid, a task that is not running with
// ErrWrongState, another fence with ErrLeaseLost, an unknown task with
// ErrNotFound, and writes nothing.
func TestSaveStepBadInput(t *testing.T) {
	t.Parallel()
	c, drv := setup(t)
	ctx := t.Context()
	info, err := c.Enqueue(ctx, "t.known", payload{})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := c.Enqueue(ctx, "t.other", payload{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claimed, err := drv.Claim(ctx, driver.ClaimParams{Queue: keel.DefaultQueue, Limit: 1, Types: []string{"t.known"}, Owner: "n",
		Now: now, LeaseExpiresAt: now.Add(time.Minute)})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	fence := claimed[0].Fence
	for _, tc := range []struct {
		name   string
		id     int64
		fence  int64
		step   string
		result string
		want   error
	}{
		{"id 0", 0, fence, "s", `1`, keel.ErrInvalid},
		{"fence 0", info.ID, 0, "s", `1`, keel.ErrInvalid},
		{"empty name", info.ID, fence, "", `1`, keel.ErrInvalid},
		{"quote in name", info.ID, fence, `a"b`, `1`, keel.ErrInvalid},
		{"long name", info.ID, fence, strings.Repeat("n", 201), `1`, keel.ErrInvalid},
		{"no result", info.ID, fence, "s", ``, keel.ErrInvalid},
		{"invalid JSON", info.ID, fence, "s", `{"a":`, keel.ErrInvalid},
		{"unknown task", 999999, 1, "s", `1`, keel.ErrNotFound},
		{"pending task", pending.ID, 1, "s", `1`, keel.ErrWrongState},
		{"other fence", info.ID, fence + 1, "s", `1`, keel.ErrLeaseLost},
	} {
		if _, err := c.SaveStep(ctx, tc.id, tc.fence, tc.step, json.RawMessage(tc.result)); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, id := range []int64{info.ID, pending.ID} {
		if row, err := drv.Get(ctx, id); err != nil || row.Steps != nil {
			t.Fatalf("task %d after refused steps: %+v, %v", id, row, err)
		}
	}
	got, err := c.SaveStep(ctx, info.ID, fence, "s", json.RawMessage(`{"ok":true}`))
	if err != nil || len(got.Steps) != 1 || string(got.Steps[0].Result) != `{"ok":true}` {
		t.Fatalf("good step: %+v, %v", got, err)
	}
}
