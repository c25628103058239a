package drill_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel/internal/alerts"
	"github.com/keelq/keel/internal/drill"
	"github.com/keelq/keel/internal/kerr"
)

// RunFor refuses a drill that cannot trip an alert, before writing
// anything.
func TestDrillRunForRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		off     bool
		timeout time.Duration
		limit   int
		want    string
	}{
		{true, time.Second, 5, "alerts are off in this client (Config.Alerts.Off): there is nothing to drill"},
		{false, 0, 5, "drill timeout must be positive, got 0s"},
		{false, time.Second, -1, "the dead_per_hour rule is off: the drill has no alert to trip"},
		{false, time.Second, 1001, "the dead_per_hour rule fires above 1001: the drill makes at most 1001 dead letters"},
	} {
		b := setup(t)
		b.cfg.AlertsOff = tc.off
		b.cfg.DeadPerHour = func(context.Context) (int, error) { return tc.limit, nil }
		r, err := drill.New(b.cfg).RunFor(context.Background(), tc.timeout, []string{"log"})
		if r != nil || !errors.Is(err, kerr.ErrInvalid) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%+v: %v %v, want %q", tc, r, err, tc.want)
		}
		if len(b.tasks) != 0 {
			t.Errorf("%+v: a refused drill enqueued", tc)
		}
	}
	b := setup(t)
	down := errors.New("down")
	b.cfg.DeadPerHour = func(context.Context) (int, error) { return 0, down }
	if _, err := drill.New(b.cfg).RunFor(context.Background(), time.Second, nil); !errors.Is(err, down) {
		t.Fatalf("the rules cannot be read: %v", err)
	}
}

// RunFor dead-letters one task more than the rule allows.
func TestDrillRunForTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.DeadPerHour = func(context.Context) (int, error) { return 2, nil }
	b.cfg.Enqueue = func(ctx context.Context, task alerts.Task) error {
		b.tasks <- task
		if len(b.tasks) == 3 {
			b.drv.fire(t0.Add(time.Second), "log")
		}
		return nil
	}
	r, err := drill.New(b.cfg).RunFor(context.Background(), time.Minute, []string{"log"})
	if err != nil || r.Tasks != 3 || !r.Passed {
		t.Fatalf("report %+v %v", r, err)
	}
}
