package keel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/backoff"
	"github.com/keelq/keel/internal/digest"
	"github.com/keelq/keel/internal/engine"
)

const (
	// deliveryAttempts bounds the attempts of one delivery: with the
	// default RetryMax of 5m, about three and a half hours of retries.
	deliveryAttempts = 50
	// failingAfter is the attempt from which a failed delivery logs at
	// ERROR that its notifier keeps failing.
	failingAfter = 3
	// scanAlerts is how many of the newest alerts each process checks
	// for events its notifiers were not sent.
	scanAlerts = 200
	// scanWindow is how far back the scan looks for events to deliver:
	// an alert still firing is always delivered, a resolution only when
	// it is this recent.
	scanWindow = time.Hour
)

// deliveryPayload is the payload of a keel.notify.<name> task.
type deliveryPayload struct {
	AlertID int64  `json:"alert_id"`
	Event   string `json:"event"`
}

// alertLoop runs in every started client: the leader evaluates the rules,
// then every process makes sure each recent alert event has a delivery
// task for each of its notifiers.
func (c *Client) alertLoop() engine.Loop {
	return engine.Loop{Interval: c.cfg.Alerts.Interval, Run: func(ctx context.Context) {
		if e := c.engine(); e != nil && e.Leading() {
			if err := c.evaluateAlerts(ctx); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("keel: evaluating the alert rules failed; next try in one interval", "error", err)
			}
		}
		if err := c.scanDeliveries(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn("keel: looking for undelivered alerts failed; next try in one interval", "error", err)
		}
	}}
}

// scanDeliveries enqueues the deliveries this process's notifiers are
// missing for the newest alerts: an event fired or resolved while another
// process led, or a delivery task that could not be enqueued.
func (c *Client) scanDeliveries(ctx context.Context) error {
	rows, err := c.drv.ListAlerts(ctx, driver.AlertFilter{Limit: scanAlerts})
	if err != nil {
		return err
	}
	recent := c.cfg.Now().Add(-scanWindow)
	for i := range rows {
		a := &rows[i]
		// A notifier added later gets what fires now, not the history.
		if a.Open() || a.FiredAt.After(recent) || a.ResolvedAt.After(recent) {
			c.enqueueDeliveries(ctx, a, recent)
		}
	}
	return nil
}

// enqueueDeliveries enqueues one delivery task per notifier of this
// process for each event of a since the given time (the alert still
// firing counts as now) that has no delivery record yet. The
// task's idempotency key names alert, event and notifier, so processes
// and rounds that enqueue the same delivery make one task.
func (c *Client) enqueueDeliveries(ctx context.Context, a *driver.AlertRow, since time.Time) {
	var events []string
	if a.Open() || a.FiredAt.After(since) {
		events = append(events, driver.AlertFired)
	}
	if !a.Open() && a.ResolvedAt.After(since) {
		events = append(events, driver.AlertResolved)
	}
	for _, ev := range events {
		for _, name := range c.Notifiers() {
			if recorded(a, ev, name) || (a.Rule == RuleNotifierFailing && a.Subject == "notifier:"+name) {
				// A failing notifier is not told that it fails: that
				// delivery would fail too, and keep the alert firing.
				continue
			}
			key := fmt.Sprintf("keel.alert:%d:%s:%s", a.ID, ev, name)
			if _, err := c.enqueueInternal(ctx, notifyType(name), deliveryPayload{AlertID: a.ID, Event: ev}, key, deliveryAttempts, 30*time.Second); err != nil {
				c.cfg.Logger.Warn("keel: enqueue an alert delivery failed; retried at the next scan",
					"alert", a.ID, "event", ev, "notifier", name, "error", err)
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

// enqueueInternal inserts one task of keel's own into ReservedQueue.
func (c *Client) enqueueInternal(ctx context.Context, taskType string, payload any, key string, maxAttempts int, timeout time.Duration) (*driver.TaskRow, error) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	canon, err := digest.Canonical(raw)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	p := driver.InsertParams{Queue: ReservedQueue, Type: taskType, Payload: canon, MaxAttempts: maxAttempts,
		RunAt: now, Timeout: timeout, Now: now, PayloadDigest: digest.Sum(append([]byte(taskType+"\x00"), canon...))}
	if key != "" {
		p.IdemKey = digest.ExplicitKey(key)
	}
	res, err := c.drv.Insert(ctx, []driver.InsertParams{p})
	if err != nil {
		return nil, unavailable(ctx, err)
	}
	if !res[0].Duplicate {
		c.wrote(res[0].Task)
	}
	return res[0].Task, nil
}

// internalHandlers are the handlers of keel's own tasks this client runs:
// one delivery type per notifier, and the drill's task.
func (c *Client) internalHandlers() map[string]engine.Handler {
	hs := map[string]engine.Handler{drillType: func(context.Context, *driver.TaskRow) (json.RawMessage, error) {
		return nil, Permanent(errors.New("keel drill: dead-lettered on purpose to check that alerts reach a person"))
	}}
	notifiers := map[string]Notifier{logNotifierName: logNotifier{c.cfg.Logger}}
	for _, n := range c.cfg.Alerts.Notifiers {
		notifiers[n.Name()] = n
	}
	for name, n := range notifiers {
		hs[notifyType(name)] = func(ctx context.Context, row *driver.TaskRow) (json.RawMessage, error) {
			return nil, c.deliver(ctx, n, row)
		}
	}
	return hs
}

// deliveryBackoff is the retry policy of delivery tasks.
func (c *Client) deliveryBackoff() backoff.Policy {
	return backoff.Policy{Base: time.Second, Max: c.cfg.Alerts.RetryMax, Jitter: 0.2}
}

// deliver runs one delivery attempt and records it.
func (c *Client) deliver(ctx context.Context, n Notifier, row *driver.TaskRow) error {
	var p deliveryPayload
	if err := json.Unmarshal(row.Payload, &p); err != nil {
		return Permanent(fmt.Errorf("alert delivery payload: %w", err))
	}
	a, err := c.drv.GetAlert(ctx, p.AlertID)
	if errors.Is(err, driver.ErrNotFound) {
		return Permanent(fmt.Errorf("alert %d no longer exists", p.AlertID))
	}
	if err != nil {
		return err
	}
	err = n.Notify(ctx, alertFromRow(a, p.Event))
	rec := driver.DeliveryParams{AlertID: a.ID, Event: p.Event, Notifier: n.Name(), Delivered: err == nil, Now: c.cfg.Now()}
	if err != nil {
		rec.Error = truncate(err.Error(), driver.MaxAlertText)
	}
	if rerr := c.drv.RecordDelivery(ctx, rec); rerr != nil {
		c.cfg.Logger.Warn("keel: recording an alert delivery failed", "alert", a.ID, "notifier", n.Name(), "error", rerr)
	}
	if err != nil && row.Attempt >= failingAfter {
		last := row.Attempt >= row.MaxAttempts
		msg := "keel: alert notifier keeps failing; retrying with backoff"
		if last {
			msg = "keel: alert notifier failed on every attempt; giving this delivery up"
		}
		c.cfg.Logger.Error(msg, "notifier", n.Name(), "alert", a.ID, "rule", a.Rule, "subject", a.Subject,
			"event", p.Event, "attempt", row.Attempt, "max_attempts", row.MaxAttempts, "error", err)
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// logNotifier is keel's own notifier: the log, at ERROR when an alert
// fires (WARN for notifier_failing) and WARN when it resolves.
type logNotifier struct{ log *slog.Logger }

func (logNotifier) Name() string { return logNotifierName }

func (l logNotifier) Notify(ctx context.Context, a *Alert) error {
	if a.Event == driver.AlertResolved {
		l.log.Warn("keel: ALERT RESOLVED: "+a.ResolvedMessage, "alert", a.ID, "rule", a.Rule, "subject", a.Subject,
			"fired_at", a.FiredAt, "resolved_at", a.ResolvedAt)
		return nil
	}
	level := slog.LevelError
	if a.Rule == RuleNotifierFailing {
		level = slog.LevelWarn
	}
	l.log.Log(ctx, level, "keel: ALERT: "+a.Message, "alert", a.ID, "rule", a.Rule, "subject", a.Subject, "next", a.Hint, "values", a.Values)
	return nil
}

// WebhookNotifier posts each alert event as JSON to URL: the alert's
// fields plus "text", one line that chat tools (Slack, Mattermost,
// Rocket.Chat, Google Chat and others) show as the message. Any 2xx answer
// is a delivery; anything else is retried.
type WebhookNotifier struct {
	// ID names the notifier; default "webhook".
	ID string
	// URL receives the POST. Required: http or https.
	URL string
	// Headers are sent with each request (for example Authorization);
	// keep secrets out of source: read them from the environment.
	Headers map[string]string
	// Client sends the requests; default one with a 10s timeout.
	Client *http.Client
}

// Name returns ID, or "webhook".
func (w *WebhookNotifier) Name() string {
	if w.ID == "" {
		return "webhook"
	}
	return w.ID
}

// WebhookBody is the JSON a WebhookNotifier posts.
type WebhookBody struct {
	Text       string         `json:"text"`
	Event      string         `json:"event"`
	ID         int64          `json:"id"`
	Rule       string         `json:"rule"`
	Subject    string         `json:"subject"`
	Message    string         `json:"message"`
	Hint       string         `json:"hint,omitempty"`
	Values     map[string]any `json:"values,omitempty"`
	FiredAt    time.Time      `json:"fired_at"`
	ResolvedAt *time.Time     `json:"resolved_at,omitempty"`
	Resolution string         `json:"resolution,omitempty"`
}

// validate checks the URL (Config validation calls it).
func (w *WebhookNotifier) validate() error {
	u, err := url.Parse(w.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("webhook %s: url must be an http(s) URL, got %q", w.Name(), w.URL)
	}
	return nil
}

// Notify posts a.
func (w *WebhookNotifier) Notify(ctx context.Context, a *Alert) error {
	body := WebhookBody{Text: a.Text(), Event: a.Event, ID: a.ID, Rule: a.Rule, Subject: a.Subject, Message: a.Message,
		Hint: a.Hint, Values: a.Values, FiredAt: a.FiredAt, Resolution: a.ResolvedMessage}
	if !a.ResolvedAt.IsZero() && a.Event == driver.AlertResolved {
		body.ResolvedAt = &a.ResolvedAt
	}
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(raw))
	if err != nil {
		return Permanent(fmt.Errorf("webhook %s: %w", w.Name(), err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "keel-alerts")
	req.Header.Set("Idempotency-Key", strconv.FormatInt(a.ID, 10)+"-"+a.Event)
	for k, v := range w.Headers {
		req.Header.Set(k, v)
	}
	client := w.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", w.Name(), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook %s: %s answered %s: %s", w.Name(), w.URL, resp.Status, bytes.TrimSpace(snippet))
	}
	return nil
}
