package keel

import (
	"context"
	"time"

	"github.com/keelq/keel/internal/drill"
)

// The drill (seed 003 §4.2: every quarter the team creates dead letters on
// purpose to check that the alert path still works). Package
// internal/drill runs it.

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
	d := drill.New(drill.Config{Driver: c.drv, Enqueue: c.enqueueInternal, Wrap: unavailable, Now: c.cfg.Now,
		AlertsOff: c.cfg.Alerts.Off, DeadPerHour: func(ctx context.Context) (int, error) {
			rules, _, err := c.AlertRules(ctx)
			return rules.DeadPerHour, err
		}})
	r, err := d.RunFor(ctx, timeout, c.Notifiers())
	if r == nil {
		return nil, err
	}
	report := &DrillReport{Started: r.Started, Tasks: r.Tasks, AlertID: r.AlertID, FiredAfter: r.FiredAfter,
		Passed: r.Passed, Cleaned: r.Cleaned}
	for _, n := range r.Notifiers {
		report.Notifiers = append(report.Notifiers, DrillNotifier(n))
	}
	return report, err
}
