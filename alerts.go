package keel

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/alerts"
	"github.com/keelq/keel/internal/enqueue"
	"github.com/keelq/keel/internal/estimator"
)

// Alerts (seed 003 §4.2: more than three failed tasks notify a person).
//
// The leader evaluates AlertRules from the live counters every
// AlertConfig.Interval and opens or resolves alerts in keel_alerts: each
// alert fires once and resolves once. Every started client then delivers
// each alert event to each of its notifiers as a keel task of its own
// (queue "keel", type "keel.notify.<name>"), so delivery is retried with
// backoff and survives restarts like any task. Package internal/alerts
// does both; this file holds the public types and wires it.

// ReservedQueue is the queue of keel's own tasks: alert deliveries, on_dead
// hooks and the drill. Users cannot enqueue to it, nor register types
// starting with "keel.". Its tasks count in no user figure (Stats,
// History, Counts, Latency, the metrics' user series): Stats.Keel shows
// them apart.
const ReservedQueue = "keel"

const (
	reservedTypePrefix = enqueue.KeelTypePrefix
	notifyTypePrefix   = alerts.NotifyTypePrefix
)

// reserved reports whether a type or queue name belongs to keel itself.
func reservedType(t string) bool  { return enqueue.ReservedType(t) }
func reservedQueue(q string) bool { return q == ReservedQueue }

// IsKeelTask reports whether a task of this queue and type is keel's own
// work (queue ReservedQueue, or a type starting with "keel."), which is
// kept out of the figures of users' work.
func IsKeelTask(queue, taskType string) bool { return reservedQueue(queue) || reservedType(taskType) }

// The alert rules.
const (
	RuleDeadPerHour    = "dead_per_hour"
	RuleOldestReadyAge = "oldest_ready_age"
	RuleFailureRatio   = "failure_ratio"
	RuleNoLiveWorker   = "no_live_worker"
	RuleNodeLost       = "node_lost"
	// RuleNotifierFailing fires for a notifier whose alert deliveries
	// fail: one dead-lettered in the last hour, or one waiting to retry
	// after at least three failed attempts in the last hour.
	RuleNotifierFailing = "notifier_failing"
)

// AlertRuleNames returns the name of every alert rule that can fire: the
// rules of AlertRules, brake_open, sequence_blocked and notifier_failing.
func AlertRuleNames() []string { return slices.Clone(alerts.RuleNames) }

// AlertRules are the conditions the leader watches. DefaultAlertRules
// gives the seed's values; a runtime change (Client.SetAlertRules, the
// API) replaces the configured rules in every process until reset.
type AlertRules struct {
	// DeadPerHour fires when more than this many tasks were dead-lettered
	// in the last hour, for each type and for all types together.
	// -1: off (less is invalid). Default 3.
	DeadPerHour int `json:"dead_per_hour"`
	// OldestReadyAge fires for a queue whose oldest ready task has waited
	// longer than this (the counters keep run times by minute, so up to a
	// minute late). 0: off. Default 10m.
	OldestReadyAge time.Duration `json:"oldest_ready_age"`
	// FailureRatio fires for a type when more than this share of its
	// attempts that ended in the last FailureWindow failed, once at least
	// FailureMinAttempts ended. 0: off. Default 0.5 of at least 20 in 5m.
	FailureRatio       float64       `json:"failure_ratio"`
	FailureMinAttempts int           `json:"failure_min_attempts"`
	FailureWindow      time.Duration `json:"failure_window"`
	// NoLiveWorker fires for a queue with ready tasks that no live node
	// works. Default on.
	NoLiveWorker bool `json:"no_live_worker"`
	// NodeLost fires for a registered node whose heartbeat is older than
	// three heartbeat intervals (at least 30s). Default on.
	NodeLost bool `json:"node_lost"`
}

// DefaultAlertRules returns the rules used unless configured otherwise.
func DefaultAlertRules() AlertRules {
	return AlertRules{
		DeadPerHour: 3, OldestReadyAge: 10 * time.Minute,
		FailureRatio: 0.5, FailureMinAttempts: 20, FailureWindow: 5 * time.Minute,
		NoLiveWorker: true, NodeLost: true,
	}
}

// Validate rejects rules that cannot be evaluated, with the rules
// `keel config check` applies to [alerts].
func (r AlertRules) Validate() error { return alerts.Rules(r).Validate() }

// AlertConfig configures alerting; see Config.Alerts.
type AlertConfig struct {
	// Rules are the conditions watched; nil: DefaultAlertRules.
	Rules *AlertRules
	// Notifiers receive every alert event, besides keel's log (an ERROR
	// record when an alert fires, WARN when it resolves and when
	// notifier_failing fires), which always does; a notifier is not sent
	// the notifier_failing alert about itself. Every process that
	// configures a notifier delivers to it; processes configuring the same
	// name must mean the same receiver. Default none.
	Notifiers []Notifier
	// Interval is how often the leader evaluates the rules, and how often
	// each process looks for alert events its notifiers have not been
	// sent. Default 15s.
	Interval time.Duration
	// RetryMax caps the wait between delivery attempts, which starts at
	// 1s and doubles (with jitter); a delivery is given up after 50
	// attempts. Default 5m.
	RetryMax time.Duration
	// Off turns alerting off in this process: it neither evaluates rules
	// nor delivers. Default false.
	Off bool
}

// Notifier delivers alert events to a person: a chat webhook, a pager.
type Notifier interface {
	// Name identifies the notifier in delivery records and task types:
	// 1–64 of a-z, 0-9, '_' and '-'; "log" is keel's own.
	Name() string
	// Notify delivers one event of a. An error is retried with backoff.
	Notify(ctx context.Context, a *Alert) error
}

// Alert is one alert: what fired, with the numbers that tripped it and
// what to run next, and, once it resolved, why.
type Alert struct {
	ID      int64
	Rule    string
	Subject string // "all", "type:<name>", "queue:<name>", "node:<name>" or "notifier:<name>"
	// Event is what a notifier is told about: "fired" or "resolved".
	// Alerts read with Client.Alerts carry "fired" while open.
	Event string
	// Message and Values are the numbers the alert fired with; they stay
	// as they were.
	Message string
	Hint    string
	Values  map[string]any
	FiredAt time.Time
	// CurrentMessage and CurrentValues are the numbers of the leader's
	// latest evaluation while the alert fired (the last ones before it
	// resolved), recorded at CurrentAt: the same as Message, Values and
	// FiredAt until they changed.
	CurrentMessage string
	CurrentValues  map[string]any
	CurrentAt      time.Time
	// ResolvedAt is zero while the alert fires.
	ResolvedAt      time.Time
	ResolvedMessage string
	Deliveries      []AlertDelivery
}

// Firing reports whether the alert is still open.
func (a *Alert) Firing() bool { return a.ResolvedAt.IsZero() }

// Text is the alert event in one line of plain text, for chat tools.
func (a *Alert) Text() string {
	if a.Event == driver.AlertResolved {
		return fmt.Sprintf("[keel] RESOLVED %s %s: %s", a.Rule, a.Subject, a.ResolvedMessage)
	}
	s := fmt.Sprintf("[keel] FIRING %s %s: %s", a.Rule, a.Subject, a.Message)
	if a.Hint != "" {
		s += " Next: " + a.Hint
	}
	return s
}

// AlertDelivery is one notifier's delivery of one event of an alert.
type AlertDelivery struct {
	Event    string
	Notifier string
	Attempts int
	// DeliveredAt is zero until an attempt succeeded.
	DeliveredAt time.Time
	LastError   string
}

// AlertFilter selects alerts for Client.Alerts, newest first.
type AlertFilter struct {
	Rule, Subject string
	Firing        bool      // only open alerts
	Since         time.Time // fired at or after; zero: any
	BeforeID      int64     // paging: older than this id
	Limit         int       // 1..1000; 0: 100
}

// Alerts lists alerts, newest first, with their deliveries.
func (c *Client) Alerts(ctx context.Context, f AlertFilter) ([]*Alert, error) {
	df := driver.AlertFilter{Rule: f.Rule, Subject: f.Subject, Open: f.Firing, Since: f.Since, BeforeID: f.BeforeID, Limit: f.Limit}
	rows, err := alerts.List(ctx, c.drv, df, unavailable)
	if err != nil {
		return nil, err
	}
	out := make([]*Alert, len(rows))
	for i := range rows {
		out[i] = alertFromRow(&rows[i], "")
	}
	return out, nil
}

// GetAlert loads one alert with its deliveries; ErrNotFound when there is
// no such alert.
func (c *Client) GetAlert(ctx context.Context, id int64) (*Alert, error) {
	row, err := alerts.Get(ctx, c.drv, id, unavailable)
	if err != nil {
		return nil, err
	}
	return alertFromRow(row, ""), nil
}

func alertFromRow(r *driver.AlertRow, event string) *Alert {
	f := alerts.FiguresOf(r, event)
	a := &Alert{ID: r.ID, Rule: r.Rule, Subject: r.Subject, Event: f.Event, Message: r.Message, Hint: r.Hint,
		Values: f.Values, FiredAt: r.FiredAt, CurrentMessage: f.CurrentMessage, CurrentValues: f.CurrentValues,
		CurrentAt: f.CurrentAt, ResolvedAt: r.ResolvedAt, ResolvedMessage: r.ResolvedMessage}
	for _, d := range f.Deliveries {
		a.Deliveries = append(a.Deliveries, AlertDelivery(d))
	}
	return a
}

// AlertRules returns the rules in force: those set at runtime when there
// are, else the configured ones; runtime reports which.
func (c *Client) AlertRules(ctx context.Context) (rules AlertRules, runtime bool, err error) {
	r, runtime, err := c.ruleStore().Load(ctx)
	return AlertRules(r), runtime, err
}

// SetAlertRules replaces the rules in force in every process (the leader
// reads them at each evaluation) until ResetAlertRules. Invalid rules are
// refused and nothing is stored.
func (c *Client) SetAlertRules(ctx context.Context, r AlertRules) error {
	return c.ruleStore().Set(ctx, alerts.Rules(r))
}

// ResetAlertRules drops the runtime rules: each process's configured
// rules apply again.
func (c *Client) ResetAlertRules(ctx context.Context) error { return c.ruleStore().Reset(ctx) }

// ruleStore reads and writes the rules set at runtime. alerts.Rules has
// AlertRules' fields: a new rule is added to both.
func (c *Client) ruleStore() alerts.RuleStore {
	return alerts.RuleStore{Meta: c.drv, Configured: alerts.Rules(*c.cfg.Alerts.Rules), Now: c.cfg.Now, Wrap: unavailable}
}

// newAlerter wires keel's alert service to c: the leader's evaluation of
// the rules and this process's deliveries to its notifiers.
func newAlerter(c *Client) *alerts.Alerter {
	cfg := alerts.Config{Driver: c.drv, Enqueue: c.enqueueInternal, LiveWindow: c.cfg.liveWindow(),
		RetryMax: c.cfg.Alerts.RetryMax, Now: c.cfg.Now, Logger: c.cfg.Logger,
		Rules: func(ctx context.Context) (alerts.Rules, error) {
			r, _, err := c.ruleStore().Load(ctx)
			return r, err
		},
		Snapshot: func(ctx context.Context) (*estimator.Snapshot, error) { return c.snaps.Read(ctx, 0) },
		Leading:  func() bool { return c.eng.Load().Leading() },
	}
	for _, n := range c.cfg.Alerts.Notifiers {
		cfg.Notifiers = append(cfg.Notifiers, alerts.Notifier{Name: n.Name(),
			Notify: func(ctx context.Context, a *driver.AlertRow, event string) error {
				return n.Notify(ctx, alertFromRow(a, event))
			}})
	}
	return alerts.New(cfg)
}

// enqueueInternal inserts one task of keel's own into ReservedQueue and
// wakes this process's workers for it.
func (c *Client) enqueueInternal(ctx context.Context, t alerts.Task) error {
	// The engine is looked up after the insert: a Start that ends during it
	// still has its workers woken.
	wrote := func(r *driver.TaskRow) { c.eng.Load().Wrote(r) }
	return unavailable(ctx, t.Insert(ctx, c.drv, c.cfg.Now(), wrote))
}

// Notifiers names this client's notifiers, keel's log first.
func (c *Client) Notifiers() []string {
	if c.cfg.Alerts.Off {
		return nil
	}
	names := []string{alerts.LogNotifier}
	for _, n := range c.cfg.Alerts.Notifiers {
		names = append(names, n.Name())
	}
	return names
}

// validateAlerts checks Config.Alerts.
func (c Config) validateAlerts() error {
	a := c.Alerts
	ns := make([]*alerts.Configured, len(a.Notifiers))
	for i, n := range a.Notifiers {
		if n == nil {
			continue
		}
		ns[i] = &alerts.Configured{Name: n.Name()}
		if v, ok := n.(interface{ validate() error }); ok {
			ns[i].Validate = v.validate
		}
	}
	return alerts.CheckConfig(alerts.Rules(*a.Rules), a.Interval, a.RetryMax, ns) // Rules set by withDefaults
}
