package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/engine"
	"github.com/keelq/keel/internal/outcome"
	"github.com/keelq/keel/internal/shorten"
)

const (
	// DeliveryAttempts bounds the attempts of one delivery: with the
	// default RetryMax of 5m, about three and a half hours of retries.
	DeliveryAttempts = 50
	// ScanAlerts is how many of the newest alerts each process checks for
	// events its notifiers were not sent.
	ScanAlerts = 200
	// ScanWindow is how far back the scan looks for events to deliver: an
	// alert still firing is always delivered, a resolution only when it
	// is this recent.
	ScanWindow = time.Hour
)

// Task is one task of keel's own for Config.Enqueue.
type Task struct {
	Type    string
	Payload any
	// Key is the task's idempotency key; "" for none.
	Key         string
	MaxAttempts int
	Timeout     time.Duration
}

// InsertParams returns the insert of t into Queue, due at now.
func (t Task) InsertParams(now time.Time) (driver.InsertParams, error) {
	raw, err := json.Marshal(t.Payload)
	if err != nil {
		return driver.InsertParams{}, err
	}
	canon, err := digest.Canonical(raw)
	if err != nil {
		return driver.InsertParams{}, err
	}
	p := driver.InsertParams{Queue: Queue, Type: t.Type, Payload: canon, MaxAttempts: t.MaxAttempts,
		RunAt: now, Timeout: t.Timeout, Now: now, PayloadDigest: digest.Sum(append([]byte(t.Type+"\x00"), canon...))}
	if t.Key != "" {
		p.IdemKey = digest.ExplicitKey(t.Key)
	}
	return p, nil
}

// deliveryPayload is the payload of a keel.notify.<name> task.
type deliveryPayload struct {
	AlertID int64  `json:"alert_id"`
	Event   string `json:"event"`
}

// scanDeliveries enqueues the deliveries this process's notifiers are
// missing for the newest alerts: an event fired or resolved while another
// process led, or a delivery task that could not be enqueued.
func (a *Alerter) scanDeliveries(ctx context.Context) error {
	rows, err := a.cfg.Driver.ListAlerts(ctx, driver.AlertFilter{Limit: ScanAlerts})
	if err != nil {
		return err
	}
	recent := a.clk.Now().Add(-ScanWindow)
	for i := range rows {
		al := &rows[i]
		// A notifier added later gets what fires now, not the history.
		if al.Open() || al.FiredAt.After(recent) || al.ResolvedAt.After(recent) {
			a.enqueueDeliveries(ctx, al, recent)
		}
	}
	return nil
}

// enqueueDeliveries enqueues one delivery task per notifier of this
// process for each event of al since the given time (the alert still
// firing counts as now) that has no delivery record yet. The task's
// idempotency key names alert, event and notifier, so processes and
// rounds that enqueue the same delivery make one task.
func (a *Alerter) enqueueDeliveries(ctx context.Context, al *driver.AlertRow, since time.Time) {
	var events []string
	if al.Open() || al.FiredAt.After(since) {
		events = append(events, driver.AlertFired)
	}
	if !al.Open() && al.ResolvedAt.After(since) {
		events = append(events, driver.AlertResolved)
	}
	for _, ev := range events {
		for _, n := range a.notifiers {
			if recorded(al, ev, n.Name) || (al.Rule == RuleNotifierFailing && al.Subject == "notifier:"+n.Name) {
				// A failing notifier is not told that it fails: that
				// delivery would fail too, and keep the alert firing.
				continue
			}
			t := Task{Type: NotifyType(n.Name), Payload: deliveryPayload{AlertID: al.ID, Event: ev},
				Key: fmt.Sprintf("keel.alert:%d:%s:%s", al.ID, ev, n.Name), MaxAttempts: DeliveryAttempts, Timeout: 30 * time.Second}
			if err := a.cfg.Enqueue(ctx, t); err != nil {
				a.cfg.Logger.Warn("keel: enqueue an alert delivery failed; retried at the next scan",
					"alert", al.ID, "event", ev, "notifier", n.Name, "error", err)
			}
		}
	}
}

// recorded reports whether a delivery of event to notifier was attempted.
func recorded(a *driver.AlertRow, event, notifier string) bool {
	for _, d := range a.Deliveries {
		if d.Event == event && d.Notifier == notifier {
			return true
		}
	}
	return false
}

// Handlers are the handlers of keel's own tasks: one delivery type per
// notifier, and the drill's type, which fails for good at once.
func (a *Alerter) Handlers() map[string]engine.Handler {
	hs := map[string]engine.Handler{DrillType: func(context.Context, *driver.TaskRow) (json.RawMessage, error) {
		return nil, &outcome.Permanent{Err: errors.New("keel drill: dead-lettered on purpose to check that alerts reach a person")}
	}}
	for _, n := range a.notifiers {
		hs[NotifyType(n.Name)] = func(ctx context.Context, row *driver.TaskRow) (json.RawMessage, error) {
			return nil, a.deliver(ctx, n, row)
		}
	}
	return hs
}

// Backoff is the retry policy of delivery tasks.
func (a *Alerter) Backoff() backoff.Policy {
	return backoff.Policy{Base: time.Second, Max: a.cfg.RetryMax, Jitter: 0.2}
}

// deliver runs one delivery attempt and records it.
func (a *Alerter) deliver(ctx context.Context, n Notifier, row *driver.TaskRow) error {
	var p deliveryPayload
	if err := json.Unmarshal(row.Payload, &p); err != nil {
		return &outcome.Permanent{Err: fmt.Errorf("alert delivery payload: %w", err)}
	}
	al, err := a.cfg.Driver.GetAlert(ctx, p.AlertID)
	if errors.Is(err, driver.ErrNotFound) {
		return &outcome.Permanent{Err: fmt.Errorf("alert %d no longer exists", p.AlertID)}
	}
	if err != nil {
		return err
	}
	err = n.Notify(ctx, al, p.Event)
	rec := driver.DeliveryParams{AlertID: al.ID, Event: p.Event, Notifier: n.Name, Delivered: err == nil, Now: a.clk.Now()}
	if err != nil {
		// Cut at a character, so that the record stays valid UTF-8.
		rec.Error = shorten.String(err.Error(), driver.MaxAlertText-len("…"))
	}
	if rerr := a.cfg.Driver.RecordDelivery(ctx, rec); rerr != nil {
		a.cfg.Logger.Warn("keel: recording an alert delivery failed", "alert", al.ID, "notifier", n.Name, "error", rerr)
	}
	if err != nil && row.Attempt >= FailingAfter {
		last := row.Attempt >= row.MaxAttempts
		msg := "keel: alert notifier keeps failing; retrying with backoff"
		if last {
			msg = "keel: alert notifier failed on every attempt; giving this delivery up"
		}
		a.cfg.Logger.Error(msg, "notifier", n.Name, "alert", al.ID, "rule", al.Rule, "subject", al.Subject,
			"event", p.Event, "attempt", row.Attempt, "max_attempts", row.MaxAttempts, "error", err)
	}
	return err
}

// logNotify is keel's own notifier: the log, at ERROR when an alert fires
// (WARN for notifier_failing) and WARN when it resolves.
func logNotify(log *slog.Logger) func(ctx context.Context, a *driver.AlertRow, event string) error {
	return func(ctx context.Context, a *driver.AlertRow, event string) error {
		if event == driver.AlertResolved {
			log.Warn("keel: ALERT RESOLVED: "+a.ResolvedMessage, "alert", a.ID, "rule", a.Rule, "subject", a.Subject,
				"fired_at", a.FiredAt, "resolved_at", a.ResolvedAt)
			return nil
		}
		level := slog.LevelError
		if a.Rule == RuleNotifierFailing {
			level = slog.LevelWarn
		}
		var values map[string]any
		if len(a.Values) > 0 {
			json.Unmarshal(a.Values, &values) //nolint:errcheck // written by keel as an object
		}
		log.Log(ctx, level, "keel: ALERT: "+a.Message, "alert", a.ID, "rule", a.Rule, "subject", a.Subject, "next", a.Hint, "values", values)
		return nil
	}
}
