// Package webhook posts alert events as JSON for keel.WebhookNotifier:
// it checks the notifier's URL and sends one event, telling a delivery
// (any 2xx answer) from a failure to retry and from a request that can
// never be made.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/keelq/keel/internal/outcome"
)

// Timeout bounds a request sent without the notifier's own client.
const Timeout = 10 * time.Second

// Validate checks the URL of the webhook named name: an http or https
// URL with a host.
func Validate(name, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("webhook %s: url must be an http(s) URL, got %q", name, rawURL)
	}
	return nil
}

// Post is one event to send.
type Post struct {
	Name    string            // the notifier's name, for errors
	URL     string            // receives the POST
	Headers map[string]string // sent with it, after keel's own
	Client  *http.Client      // nil: one with Timeout
	// Key is the Idempotency-Key header: the same for every retry of one
	// event.
	Key  string
	Body any // encoded as JSON
}

// Send posts p.Body. An answer outside 2xx or a failed request is an
// error to retry; a request that cannot be made is an
// outcome.Permanent error.
func Send(ctx context.Context, p Post) error {
	raw, _ := json.Marshal(p.Body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL, bytes.NewReader(raw))
	if err != nil {
		return &outcome.Permanent{Err: fmt.Errorf("webhook %s: %w", p.Name, err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "keel-alerts")
	req.Header.Set("Idempotency-Key", p.Key)
	for k, v := range p.Headers {
		req.Header.Set(k, v)
	}
	client := p.Client
	if client == nil {
		client = &http.Client{Timeout: Timeout}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", p.Name, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook %s: %s answered %s: %s", p.Name, p.URL, resp.Status, bytes.TrimSpace(snippet))
	}
	return nil
}
