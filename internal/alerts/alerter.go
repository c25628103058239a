// Package alerts evaluates keel's alert rules on the leader and delivers
// every alert event to every notifier of each process. The rules judge a
// snapshot of the counters (package estimator) and never scan the task
// table; each alert fires once and resolves once (the database decides).
// A delivery is a task of keel's own in the reserved queue, one per alert
// event and notifier, so it is retried with backoff and survives restarts
// like any task.
package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/estimator"
	"github.com/keelq/keel/internal/service"
)

// Queue is keel's reserved queue (keel.ReservedQueue), where deliveries
// and the drill's tasks run.
const Queue = "keel"

const (
	// NotifyTypePrefix starts the task type of the deliveries to one
	// notifier: keel.notify.<name>.
	NotifyTypePrefix = "keel.notify."
	// DrillType is the type of the drill's tasks, dead-lettered on
	// purpose so that an alert fires.
	DrillType = "keel.drill"
	// LogNotifier is keel's own notifier, the log, which every process
	// delivers to.
	LogNotifier = "log"
	// FailingAfter is the attempt from which a failed delivery logs at
	// ERROR that its notifier keeps failing, and how many failed attempts
	// in the last hour, with a delivery waiting to retry, make
	// notifier_failing fire (a dead-lettered delivery makes it fire at
	// once).
	FailingAfter = 3
)

// NotifyType is the task type of the deliveries to the notifier name.
func NotifyType(name string) string { return NotifyTypePrefix + name }

// keelType reports whether a task type belongs to keel itself.
func keelType(t string) bool { return strings.HasPrefix(t, "keel.") }

// Store is what an Alerter needs of a driver: the alerts table.
type Store interface {
	ListAlerts(ctx context.Context, filter driver.AlertFilter) ([]driver.AlertRow, error)
	FireAlert(ctx context.Context, params driver.FireAlertParams) (*driver.AlertRow, bool, error)
	UpdateAlert(ctx context.Context, params driver.UpdateAlertParams) (bool, error)
	ResolveAlert(ctx context.Context, params driver.ResolveAlertParams) (*driver.AlertRow, bool, error)
	GetAlert(ctx context.Context, id int64) (*driver.AlertRow, error)
	RecordDelivery(ctx context.Context, params driver.DeliveryParams) error
}

// Notifier is one receiver of alert events (a keel.Notifier, or keel's
// log).
type Notifier struct {
	Name string
	// Notify delivers event (driver.AlertFired or driver.AlertResolved)
	// of a; an error is retried with backoff.
	Notify func(ctx context.Context, a *driver.AlertRow, event string) error
}

// Config wires an Alerter.
type Config struct {
	Driver Store
	// Enqueue inserts one task of keel's own into Queue, once per
	// idempotency key.
	Enqueue func(ctx context.Context, t Task) error
	// Rules returns the rules in force, read at each evaluation.
	Rules func(ctx context.Context) (Rules, error)
	// Snapshot reads a fresh snapshot for an evaluation.
	Snapshot func(ctx context.Context) (*estimator.Snapshot, error)
	// LiveWindow is how recent a node's heartbeat must be for the node to
	// count as live.
	LiveWindow time.Duration
	// Notifiers are this process's notifiers besides keel's log, which
	// comes first.
	Notifiers []Notifier
	// RetryMax caps the wait between delivery attempts.
	RetryMax time.Duration
	// Clock tells the time of delivery records and scans; default
	// Real(Now).
	Clock  service.Clock
	Now    func() time.Time
	Logger *slog.Logger
	// Leading gates the evaluation: only the elected leader evaluates;
	// every process delivers.
	Leading func() bool
}

// Alerter evaluates the rules and delivers alert events.
type Alerter struct {
	cfg       Config
	clk       service.Clock
	notifiers []Notifier // keel's log first
}

// New returns an Alerter.
func New(cfg Config) *Alerter {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Alerter{cfg: cfg, clk: service.Or(cfg.Clock, cfg.Now)}
	a.notifiers = append([]Notifier{{Name: LogNotifier, Notify: logNotify(cfg.Logger)}}, cfg.Notifiers...)
	return a
}

// RunOnce is one round: the leader evaluates the rules, then every process
// makes sure each recent alert event has a delivery task for each of its
// notifiers. Failures are logged; the next round tries again.
func (a *Alerter) RunOnce(ctx context.Context) {
	if a.cfg.Leading() {
		if err := a.evaluateAlerts(ctx); err != nil && ctx.Err() == nil {
			a.cfg.Logger.Warn("keel: evaluating the alert rules failed; next try in one interval", "error", err)
		}
	}
	if err := a.scanDeliveries(ctx); err != nil && ctx.Err() == nil {
		a.cfg.Logger.Warn("keel: looking for undelivered alerts failed; next try in one interval", "error", err)
	}
}

// evaluateAlerts opens an alert for each condition without one, records the
// current numbers of each open alert whose condition holds, and resolves
// each open alert whose condition cleared.
func (a *Alerter) evaluateAlerts(ctx context.Context) error {
	rules, err := a.cfg.Rules(ctx)
	if err != nil {
		return err
	}
	snap, err := a.cfg.Snapshot(ctx)
	if err != nil {
		return err
	}
	conds := evaluate(rules, snap, a.cfg.LiveWindow)
	open, err := a.cfg.Driver.ListAlerts(ctx, driver.AlertFilter{Open: true, Limit: 1000})
	if err != nil {
		return fmt.Errorf("list open alerts: %w", err)
	}
	holds := map[string]condition{}
	for _, cond := range conds {
		holds[cond.key()] = cond
	}
	isOpen := map[string]bool{}
	for i := range open {
		al := &open[i]
		isOpen[al.Rule+"\n"+al.Subject] = true
		if cond, ok := holds[al.Rule+"\n"+al.Subject]; ok {
			if err := a.update(ctx, al, cond, snap.At); err != nil {
				return err
			}
			continue
		}
		row, resolved, err := a.cfg.Driver.ResolveAlert(ctx, driver.ResolveAlertParams{ID: al.ID, Message: resolution(al, rules, snap), Now: snap.At})
		if err != nil {
			return fmt.Errorf("resolve alert %d: %w", al.ID, err)
		}
		if resolved {
			a.cfg.Logger.Info("keel: alert resolved", "alert", row.ID, "rule", row.Rule, "subject", row.Subject, "message", row.ResolvedMessage)
			a.enqueueDeliveries(ctx, row, time.Time{})
		}
	}
	for _, cond := range conds {
		if isOpen[cond.key()] {
			continue
		}
		values, _ := json.Marshal(cond.values)
		row, fired, err := a.cfg.Driver.FireAlert(ctx, driver.FireAlertParams{Rule: cond.rule, Subject: cond.subject,
			Message: cond.message, Hint: cond.hint, Values: values, Now: snap.At})
		if err != nil {
			return fmt.Errorf("open alert %s %s: %w", cond.rule, cond.subject, err)
		}
		if fired {
			level := slog.LevelInfo
			if row.Rule == RuleNotifierFailing {
				// Its notifier may be the one that would tell a person.
				level = slog.LevelWarn
			}
			a.cfg.Logger.Log(ctx, level, "keel: alert fired", "alert", row.ID, "rule", row.Rule, "subject", row.Subject, "message", row.Message)
			a.enqueueDeliveries(ctx, row, time.Time{})
		}
	}
	return nil
}

// update records cond's numbers as the current ones of the open alert al
// when they differ from those al shows now; the numbers it fired with
// stay.
func (a *Alerter) update(ctx context.Context, al *driver.AlertRow, cond condition, now time.Time) error {
	values, _ := json.Marshal(cond.values)
	msg, vals := al.CurrentMessage, al.CurrentValues
	if msg == "" {
		msg, vals = al.Message, al.Values
	}
	if msg == cond.message && bytes.Equal(vals, values) {
		return nil
	}
	if _, err := a.cfg.Driver.UpdateAlert(ctx, driver.UpdateAlertParams{ID: al.ID, Message: cond.message, Values: values, Now: now}); err != nil {
		return fmt.Errorf("update alert %d: %w", al.ID, err)
	}
	return nil
}
