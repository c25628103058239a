// Package drill runs the alert drill: it dead-letters a few tasks of
// keel's reserved drill type on purpose, waits until the alert they trip
// reached every notifier, then removes them, which resolves the alert. It
// checks that the whole path from a dead letter to a person still works.
package drill

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/alerts"
	"github.com/keelq/keel/internal/kerr"
	"github.com/keelq/keel/internal/service"
)

// Poll is how often a drill looks for its alert and its deliveries.
const Poll = 200 * time.Millisecond

// Store is what a drill needs of a driver: its tasks and its alert.
type Store interface {
	List(ctx context.Context, filter driver.Filter) ([]driver.TaskRow, error)
	Cancel(ctx context.Context, id int64, now time.Time) (*driver.TaskRow, error)
	PurgeMatching(ctx context.Context, filter driver.Filter) (int64, error)
	ListAlerts(ctx context.Context, filter driver.AlertFilter) ([]driver.AlertRow, error)
	ResolveAlert(ctx context.Context, params driver.ResolveAlertParams) (*driver.AlertRow, bool, error)
}

// Config wires a Drill.
type Config struct {
	Driver Store
	// Enqueue inserts one task of keel's own (alerts.Config.Enqueue).
	Enqueue func(ctx context.Context, t alerts.Task) error
	// Wrap turns a driver's error into the error returned (the client
	// marks an unreachable database); nil keeps it.
	Wrap func(ctx context.Context, err error) error
	// Clock paces the polls; default Real(Now).
	Clock service.Clock
	Now   func() time.Time
	// AlertsOff: the client evaluates no alerts, so there is nothing to
	// drill (RunFor refuses).
	AlertsOff bool
	// DeadPerHour reads the dead_per_hour rule's threshold (negative: the
	// rule is off), for RunFor.
	DeadPerHour func(ctx context.Context) (int, error)
}

// Drill runs drills.
type Drill struct {
	cfg Config
	clk service.Clock
}

// New returns a Drill.
func New(cfg Config) *Drill {
	if cfg.Wrap == nil {
		cfg.Wrap = func(_ context.Context, err error) error { return err }
	}
	return &Drill{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now)}
}

// Report is what a drill found (keel.DrillReport documents each field).
type Report struct {
	Started    time.Time
	Tasks      int
	AlertID    int64
	FiredAfter time.Duration
	Notifiers  []Notifier
	Passed     bool
	Cleaned    bool
}

// Notifier is one notifier's part in a drill (keel.DrillNotifier).
type Notifier struct {
	Name      string
	Delivered bool
	Delay     time.Duration
	Attempts  int
	LastError string
}

// RunFor runs a drill of one task more than the dead_per_hour rule
// allows, for at most timeout (see Run). It refuses (kerr.ErrInvalid) a
// drill that cannot trip an alert: alerts off, the rule off or above
// 1000, or a timeout that is not positive.
func (d *Drill) RunFor(ctx context.Context, timeout time.Duration, notifiers []string) (*Report, error) {
	if d.cfg.AlertsOff {
		return nil, kerr.Invalid("alerts are off in this client (Config.Alerts.Off): there is nothing to drill")
	}
	if timeout <= 0 {
		return nil, kerr.Invalid("drill timeout must be positive, got %v", timeout)
	}
	limit, err := d.cfg.DeadPerHour(ctx)
	if err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, kerr.Invalid("the dead_per_hour rule is off: the drill has no alert to trip")
	}
	if limit > 1000 {
		return nil, kerr.Invalid("the dead_per_hour rule fires above %d: the drill makes at most 1001 dead letters", limit)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return d.Run(ctx, limit+1, notifiers)
}

// Run dead-letters tasks tasks of alerts.DrillType and waits, until ctx
// ends, for the dead_per_hour alert of that type to reach every one of
// notifiers; then it removes its tasks. A report with Passed false and a
// nil error is a failed drill; an error means the drill could not run.
func (d *Drill) Run(ctx context.Context, tasks int, notifiers []string) (*Report, error) {
	// A drill that was cut short left its tasks: remove them, and let its
	// alert resolve, so that this drill's alert is a new one.
	if err := d.clean(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	if err := d.resolveEarlier(ctx); err != nil {
		return nil, err
	}
	r := &Report{Started: d.clk.Now(), Tasks: tasks}
	defer func() { r.Cleaned = d.clean(context.WithoutCancel(ctx)) == nil }()
	for i := 0; i < r.Tasks; i++ {
		t := alerts.Task{Type: alerts.DrillType, Payload: map[string]any{"drill": r.Started.UnixMilli(), "n": i}, MaxAttempts: 1, Timeout: 10 * time.Second}
		if err := d.cfg.Enqueue(ctx, t); err != nil {
			return r, fmt.Errorf("keel: drill: enqueue: %w", err)
		}
	}
	subject := "type:" + alerts.DrillType
	for {
		as, err := d.cfg.Driver.ListAlerts(ctx, driver.AlertFilter{Rule: alerts.RuleDeadPerHour, Subject: subject, Since: r.Started.Add(-time.Second), Limit: 1})
		if err == nil && len(as) > 0 {
			a := &as[0]
			r.AlertID, r.FiredAfter = a.ID, max(0, a.FiredAt.Sub(r.Started))
			r.Notifiers = deliveries(a, notifiers, r.Started)
			r.Passed = true
			for _, n := range r.Notifiers {
				r.Passed = r.Passed && n.Delivered
			}
			if r.Passed {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			if r.Notifiers == nil {
				for _, n := range notifiers {
					r.Notifiers = append(r.Notifiers, Notifier{Name: n})
				}
			}
			return r, nil
		case <-d.clk.After(Poll):
		}
	}
}

// deliveries are the fired event's deliveries of a to each notifier.
func deliveries(a *driver.AlertRow, names []string, start time.Time) []Notifier {
	out := make([]Notifier, len(names))
	for i, name := range names {
		out[i].Name = name
		for _, d := range a.Deliveries {
			if d.Event != driver.AlertFired || d.Notifier != name {
				continue
			}
			out[i].Attempts, out[i].LastError = d.Attempts, d.LastError
			if !d.DeliveredAt.IsZero() {
				out[i].Delivered, out[i].Delay = true, max(0, d.DeliveredAt.Sub(start))
			}
		}
	}
	return out
}

// clean cancels the drill's tasks that did not run and deletes all of
// them.
func (d *Drill) clean(ctx context.Context) error {
	for _, st := range []driver.State{driver.StatePending, driver.StateRunning} {
		rows, err := d.cfg.Driver.List(ctx, driver.Filter{Type: alerts.DrillType, Queue: alerts.Queue, State: st, Limit: 1000})
		if err != nil {
			return fmt.Errorf("keel: drill: list its tasks: %w", d.cfg.Wrap(ctx, err))
		}
		for _, r := range rows {
			if _, err := d.cfg.Driver.Cancel(ctx, r.ID, d.clk.Now()); err != nil && !errors.Is(err, driver.ErrWrongState) {
				return fmt.Errorf("keel: drill: cancel task %d: %w", r.ID, d.cfg.Wrap(ctx, err))
			}
		}
	}
	for _, st := range []driver.State{driver.StateDead, driver.StateCancelled} {
		for {
			n, err := d.cfg.Driver.PurgeMatching(ctx, driver.Filter{Type: alerts.DrillType, Queue: alerts.Queue, State: st, Limit: 1000})
			if err != nil {
				return fmt.Errorf("keel: drill: remove its tasks: %w", d.cfg.Wrap(ctx, err))
			}
			if n < 1000 {
				break
			}
		}
	}
	return nil
}

// resolveEarlier resolves an alert an earlier drill left open (its tasks
// are gone now), so that this drill trips a new one without waiting for
// the leader.
func (d *Drill) resolveEarlier(ctx context.Context) error {
	as, err := d.cfg.Driver.ListAlerts(ctx, driver.AlertFilter{Rule: alerts.RuleDeadPerHour, Subject: "type:" + alerts.DrillType, Open: true, Limit: 10})
	if err != nil {
		return fmt.Errorf("keel: drill: %w", d.cfg.Wrap(ctx, err))
	}
	for _, a := range as {
		if _, _, err := d.cfg.Driver.ResolveAlert(ctx, driver.ResolveAlertParams{ID: a.ID,
			Message: "a new drill started; the earlier drill's tasks were removed.", Now: d.clk.Now()}); err != nil {
			return fmt.Errorf("keel: drill: resolve alert %d: %w", a.ID, d.cfg.Wrap(ctx, err))
		}
	}
	return nil
}
