package keel

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/webhook"
)

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
func (w *WebhookNotifier) Name() string { return cmp.Or(w.ID, "webhook") }

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
func (w *WebhookNotifier) validate() error { return webhook.Validate(w.Name(), w.URL) }

// Notify posts a.
func (w *WebhookNotifier) Notify(ctx context.Context, a *Alert) error {
	body := WebhookBody{Text: a.Text(), Event: a.Event, ID: a.ID, Rule: a.Rule, Subject: a.Subject, Message: a.Message,
		Hint: a.Hint, Values: a.Values, FiredAt: a.FiredAt, Resolution: a.ResolvedMessage}
	if !a.ResolvedAt.IsZero() && a.Event == driver.AlertResolved {
		body.ResolvedAt = &a.ResolvedAt
	}
	return webhook.Send(ctx, webhook.Post{Name: w.Name(), URL: w.URL, Headers: w.Headers, Client: w.Client,
		Key: strconv.FormatInt(a.ID, 10) + "-" + a.Event, Body: body})
}
