package ramp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/ramp"
	"github.com/keelq/keel/internal/service/servicetest"
)

// TestPlanValidate: each bad field is ErrInvalid saying what is wrong;
// zero fields take their defaults.
func TestPlanValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		plan ramp.Plan
		want string
	}{
		{ramp.Plan{}, "a ramp needs 1..100 steps, got 0"},
		{ramp.Plan{Steps: make([]int, 101)}, "a ramp needs 1..100 steps, got 101"},
		{ramp.Plan{Steps: []int{0}}, "ramp step 1 must be in 1..10000, got 0"},
		{ramp.Plan{Steps: []int{1, 10001}}, "ramp step 2 must be in 1..10000, got 10001"},
		{ramp.Plan{Steps: []int{2, 2}}, "ramp steps must rise, got 2 after 2"},
		{ramp.Plan{Steps: []int{1}, Every: time.Millisecond}, `ramp every must be in 1s..168h, got "1ms"`},
		{ramp.Plan{Steps: []int{1}, Every: 200 * time.Hour}, `ramp every must be in 1s..168h, got "200h"`},
		{ramp.Plan{Steps: []int{1}, MaxFailureRatio: 1.5}, "ramp max_failure_ratio must be in 0..1, got 1.5"},
		{ramp.Plan{Steps: []int{1}, MinAttempts: -1}, "ramp min_attempts must be in 1..1000000 (0: the default 20), got -1"},
	} {
		if err := tc.plan.Validate(); !errors.Is(err, kerr.ErrInvalid) || err.Error() != "keel: invalid input: "+tc.want {
			t.Errorf("%+v: %v, want %q", tc.plan, err, tc.want)
		}
	}
	if err := (ramp.Plan{Steps: []int{1, 5, 10}}).Validate(); err != nil {
		t.Fatal(err)
	}
	d := ramp.Plan{Steps: []int{1}}.WithDefaults()
	if d.Every != 10*time.Minute || d.MaxFailureRatio != 0.2 || d.MinAttempts != 20 {
		t.Fatalf("defaults %+v", d)
	}
}

// TestBeginGetHalt: Begin sets the first step and stores the ramp; Get
// reads it; Halt stops it where it stands, once.
func TestBeginGetHalt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := ramp.New(b.cfg)
	ctx := context.Background()
	steps := []int{2, 4}
	st, err := j.Begin(ctx, "email", ramp.Plan{Steps: steps, Every: every})
	if err != nil {
		t.Fatal(err)
	}
	steps[0] = 99 // the stored ramp holds its own copy
	if st.Concurrency() != 2 || !st.NextAt.Equal(t0.Add(every)) || st.MinAttempts != 20 || st.Done || !st.StartedAt.Equal(t0) {
		t.Fatalf("begun %+v", st)
	}
	if p := servicetest.Recv(t, b.drv.patches); p.Name != "email" || *p.Concurrency != 2 {
		t.Fatalf("patch %+v", p)
	}
	servicetest.Recv(t, b.drv.puts)
	servicetest.Recv(t, b.applied)
	got, err := j.Get(ctx, "email")
	if err != nil || got.Concurrency() != 2 || got.Steps[0] != 2 {
		t.Fatalf("get %+v %v", got, err)
	}
	b.clk.Advance(time.Second)
	if st, err = j.Halt(ctx, "email"); err != nil || !st.Stopped || st.Reason != "stopped by an operator" || !st.UpdatedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("halt %+v %v", st, err)
	}
	servicetest.Recv(t, b.drv.puts)
	if st, err = j.Halt(ctx, "email"); err != nil || !st.Stopped {
		t.Fatalf("halt again %+v %v", st, err)
	}
	servicetest.None(t, b.drv.puts)
	one, err := j.Begin(ctx, "sms", ramp.Plan{Steps: []int{3}})
	if err != nil || !one.Done {
		t.Fatalf("a one-step ramp is done at once: %+v %v", one, err)
	}
}

// TestAPIRefuses: bad names and plans are ErrInvalid and write nothing;
// a type without a ramp is ErrNotFound.
func TestAPIRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	j := ramp.New(b.cfg)
	ctx := context.Background()
	if _, err := j.Begin(ctx, "a b", ramp.Plan{Steps: []int{1}}); !errors.Is(err, kerr.ErrInvalid) || !strings.Contains(err.Error(), `invalid task type "a b"`) {
		t.Errorf("begin of a bad name: %v", err)
	}
	if _, err := j.Begin(ctx, "email", ramp.Plan{}); !errors.Is(err, kerr.ErrInvalid) {
		t.Errorf("begin of no steps: %v", err)
	}
	servicetest.None(t, b.drv.patches)
	if _, err := j.Get(ctx, "a b"); !errors.Is(err, kerr.ErrInvalid) {
		t.Errorf("get of a bad name: %v", err)
	}
	if _, err := j.Halt(ctx, "email"); !errors.Is(err, driver.ErrNotFound) || err.Error() != "keel: no ramp for task type email: "+driver.ErrNotFound.Error() {
		t.Errorf("halt of no ramp: %v", err)
	}
	b.drv.docs[ramp.Doc("bad")] = []byte(`{"steps":[1],"step":3}`)
	if _, err := j.Get(ctx, "bad"); err == nil || !strings.HasPrefix(err.Error(), "keel: read ramp of bad: ") {
		t.Errorf("a bad document: %v", err)
	}
}
