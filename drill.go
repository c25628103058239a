package keel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keelq/keel/driver"
)

// The drill (seed 003 §4.2: every quarter the team creates dead letters on
// purpose to check that the alert path still works).

// DrillReport is what Client.Drill found.
type DrillReport struct {
	Started time.Time
	// Tasks is how many tasks of the drill's type it dead-lettered: one
	// more than the dead_per_hour rule allows.
	Tasks int
	// AlertID is the alert the drill tripped; 0 when none fired in time.
	AlertID int64
	// FiredAfter is how long after Started the alert fired.
	FiredAfter time.Duration
	Notifiers  []DrillNotifier
	// Passed: the alert fired and reached every notifier.
	Passed bool
	// Cleaned: the drill's tasks were removed afterwards.
	Cleaned bool
}

// DrillNotifier is one notifier's part in a drill.
type DrillNotifier struct {
	Name      string
	Delivered bool
	// Delay is from the drill's start to the delivery.
	Delay     time.Duration
	Attempts  int
	LastError string
}

const drillPoll = 200 * time.Millisecond

// Drill runs the alert drill: it enqueues one task more than the
// dead_per_hour rule allows, of the reserved type keel.drill, which every
// started client dead-letters at once; it waits until the leader's alert
// for that type was delivered to every notifier of this client (keel's
// log and Config.Alerts.Notifiers), or until timeout; then it removes its
// tasks, which resolves the alert. The drill's tasks count only against
// their own type, never against users' types or the all-types alert.
//
// It needs a started client somewhere (this one or another process) to
// run the leader and the drill's tasks. A report with Passed false and a
// nil error is a failed drill; an error means the drill could not run.
func (c *Client) Drill(ctx context.Context, timeout time.Duration) (*DrillReport, error) {
	if c.cfg.Alerts.Off {
		return nil, invalid("alerts are off in this client (Config.Alerts.Off): there is nothing to drill")
	}
	if timeout <= 0 {
		return nil, invalid("drill timeout must be positive, got %v", timeout)
	}
	rules, _, err := c.AlertRules(ctx)
	if err != nil {
		return nil, err
	}
	if rules.DeadPerHour < 0 {
		return nil, invalid("the dead_per_hour rule is off: the drill has no alert to trip")
	}
	if rules.DeadPerHour > 1000 {
		return nil, invalid("the dead_per_hour rule fires above %d: the drill makes at most 1001 dead letters", rules.DeadPerHour)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A drill that was cut short left its tasks: remove them, and let its
	// alert resolve, so that this drill's alert is a new one.
	if err := c.cleanDrill(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	if err := c.resolveDrillAlerts(ctx); err != nil {
		return nil, err
	}
	r := &DrillReport{Started: c.cfg.Now(), Tasks: rules.DeadPerHour + 1}
	defer func() { r.Cleaned = c.cleanDrill(context.WithoutCancel(ctx)) == nil }()
	for i := 0; i < r.Tasks; i++ {
		if _, err := c.enqueueInternal(ctx, drillType, map[string]any{"drill": r.Started.UnixMilli(), "n": i}, "", 1, 10*time.Second); err != nil {
			return r, fmt.Errorf("keel: drill: enqueue: %w", err)
		}
	}
	names := c.Notifiers()
	subject := "type:" + drillType
	for {
		as, err := c.drv.ListAlerts(ctx, driver.AlertFilter{Rule: RuleDeadPerHour, Subject: subject, Since: r.Started.Add(-time.Second), Limit: 1})
		if err == nil && len(as) > 0 {
			a := &as[0]
			r.AlertID, r.FiredAfter = a.ID, max(0, a.FiredAt.Sub(r.Started))
			r.Notifiers = drillDeliveries(a, names, r.Started)
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
				for _, n := range names {
					r.Notifiers = append(r.Notifiers, DrillNotifier{Name: n})
				}
			}
			return r, nil
		case <-time.After(drillPoll):
		}
	}
}

func drillDeliveries(a *driver.AlertRow, names []string, start time.Time) []DrillNotifier {
	out := make([]DrillNotifier, len(names))
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

// cleanDrill cancels the drill's tasks that did not run and deletes all of
// them.
func (c *Client) cleanDrill(ctx context.Context) error {
	for _, st := range []driver.State{driver.StatePending, driver.StateRunning} {
		rows, err := c.drv.List(ctx, driver.Filter{Type: drillType, Queue: ReservedQueue, State: st, Limit: 1000})
		if err != nil {
			return fmt.Errorf("keel: drill: list its tasks: %w", unavailable(ctx, err))
		}
		for _, r := range rows {
			if _, err := c.drv.Cancel(ctx, r.ID, c.cfg.Now()); err != nil && !errors.Is(err, driver.ErrWrongState) {
				return fmt.Errorf("keel: drill: cancel task %d: %w", r.ID, unavailable(ctx, err))
			}
		}
	}
	for _, st := range []driver.State{driver.StateDead, driver.StateCancelled} {
		for {
			n, err := c.drv.PurgeMatching(ctx, driver.Filter{Type: drillType, Queue: ReservedQueue, State: st, Limit: 1000})
			if err != nil {
				return fmt.Errorf("keel: drill: remove its tasks: %w", unavailable(ctx, err))
			}
			if n < 1000 {
				break
			}
		}
	}
	return nil
}

// resolveDrillAlerts resolves an alert an earlier drill left open (its
// tasks are gone now), so that this drill trips a new one without waiting
// for the leader.
func (c *Client) resolveDrillAlerts(ctx context.Context) error {
	as, err := c.drv.ListAlerts(ctx, driver.AlertFilter{Rule: RuleDeadPerHour, Subject: "type:" + drillType, Open: true, Limit: 10})
	if err != nil {
		return fmt.Errorf("keel: drill: %w", unavailable(ctx, err))
	}
	for _, a := range as {
		if _, _, err := c.drv.ResolveAlert(ctx, driver.ResolveAlertParams{ID: a.ID,
			Message: "a new drill started; the earlier drill's tasks were removed.", Now: c.cfg.Now()}); err != nil {
			return fmt.Errorf("keel: drill: resolve alert %d: %w", a.ID, unavailable(ctx, err))
		}
	}
	return nil
}
