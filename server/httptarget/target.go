package httptarget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/metrics"
)

// Defaults applied by WithDefaults to zero fields.
const (
	DefaultConnectTimeout = 2 * time.Second  // Target.ConnectTimeout
	DefaultReadTimeout    = 10 * time.Second // Target.ReadTimeout
	DefaultMaxResultBytes = 64 << 10         // Target.MaxResultBytes: 64 KiB
)

// MaxResultBytesLimit bounds Target.MaxResultBytes: a result is stored in
// the task's row, so it must stay small.
const MaxResultBytesLimit = 16 << 20

// Target binds a task type to an HTTP endpoint: each attempt of a task of
// that type POSTs the task's payload to URL. Only URL is required; every
// other field's comment ends with its default.
type Target struct {
	// URL is the absolute http:// or https:// endpoint. Required.
	// Userinfo in it is sent as basic auth and left out of error messages.
	URL string
	// ConnectTimeout bounds the TCP connect and the TLS handshake. Default 2s.
	ConnectTimeout time.Duration
	// ReadTimeout bounds the time from the connection being ready (the
	// request being sent) to the whole response being read. Default 10s.
	ReadTimeout time.Duration
	// MaxResultBytes is the largest 2xx JSON body stored as the task's
	// result; a larger one succeeds without a result. At most 16 MiB.
	// Default 64 KiB.
	MaxResultBytes int64
	// Headers are extra request headers, such as the target's own
	// credentials. They may not set the Keel-* headers, Idempotency-Key,
	// Content-Type or the headers that frame the request (Host,
	// Content-Length, Transfer-Encoding, Connection and the like).
	// Default none.
	Headers map[string]string
	// Metrics, when set, counts every request in
	// keel_http_target_requests_total and keel_http_target_duration_seconds
	// (by task type and status code, "error" when no answer came). Default
	// nil: not counted.
	Metrics *metrics.Collector
}

// WithDefaults returns t with its zero fields set to their defaults.
// Negative values are kept, so that Validate rejects them.
func (t Target) WithDefaults() Target {
	if t.ConnectTimeout == 0 {
		t.ConnectTimeout = DefaultConnectTimeout
	}
	if t.ReadTimeout == 0 {
		t.ReadTimeout = DefaultReadTimeout
	}
	if t.MaxResultBytes == 0 {
		t.MaxResultBytes = DefaultMaxResultBytes
	}
	return t
}

// Validate checks t as it is, naming the bad field. Apply WithDefaults
// first: a zero timeout is an error here (Register does both).
func (t Target) Validate() error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("httptarget: %w", err)
	}
	return nil
}

func (t Target) validate() error {
	if err := validateURL(t.URL); err != nil {
		return err
	}
	switch {
	case t.ConnectTimeout <= 0:
		return fmt.Errorf("ConnectTimeout must be positive, got %v", t.ConnectTimeout)
	case t.ReadTimeout <= 0:
		return fmt.Errorf("ReadTimeout must be positive, got %v", t.ReadTimeout)
	case t.MaxResultBytes <= 0:
		return fmt.Errorf("MaxResultBytes must be positive, got %d", t.MaxResultBytes)
	case t.MaxResultBytes > MaxResultBytesLimit:
		return fmt.Errorf("MaxResultBytes must be at most %d (16 MiB), got %d", MaxResultBytesLimit, t.MaxResultBytes)
	}
	return validateHeaders(t.Headers)
}

func validateURL(raw string) error {
	if raw == "" {
		return errors.New("URL is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("URL %q is not a valid URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("URL %q must be absolute with scheme http or https", u.Redacted())
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("URL %q has no host", u.Redacted())
	}
	if u.Opaque != "" {
		return fmt.Errorf("URL %q must be of the form scheme://host/path", u.Redacted())
	}
	return nil
}

// reservedHeaders are set by keel or by the HTTP framing; Target.Headers
// may not override them. Any header starting with "Keel-" is reserved too.
var reservedHeaders = []string{
	"Idempotency-Key", "Content-Type",
	"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive",
	"Proxy-Connection", "Upgrade", "Te", "Trailer", "Expect",
}

func validateHeaders(h map[string]string) error {
	seen := make(map[string]string, len(h))
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names) // report the same error every time
	for _, name := range names {
		if !validHeaderName(name) {
			return fmt.Errorf("Headers: invalid header name %q", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if strings.HasPrefix(canon, "Keel-") || slices.Contains(reservedHeaders, canon) {
			return fmt.Errorf("Headers: %q is set by keel and cannot be overridden", name)
		}
		if prev, dup := seen[canon]; dup {
			return fmt.Errorf("Headers: %q and %q name the same header", prev, name)
		}
		seen[canon] = name
		if !validHeaderValue(h[name]) {
			return fmt.Errorf("Headers: invalid value for %q: control characters are not allowed", name)
		}
	}
	return nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s holds no control character other
// than horizontal tab (so no CR, LF or NUL).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Register validates t (after WithDefaults) and registers a handler for
// taskType on h that POSTs each task's payload to t.URL. opts become the
// type's defaults, as with keel.Handle. Unlike keel.Handle it returns an
// error instead of panicking for an invalid type name, a duplicate
// registration or invalid options, and registers nothing then.
func Register(h *keel.Handlers, taskType string, t Target, opts ...keel.Option) (err error) {
	if h == nil {
		return errors.New("httptarget: Register: nil Handlers")
	}
	t = t.WithDefaults()
	if err := t.validate(); err != nil {
		return fmt.Errorf("httptarget: task type %q: %w", taskType, err)
	}
	if slices.Contains(h.Types(), taskType) {
		return fmt.Errorf("httptarget: task type %q is already registered", taskType)
	}
	c := newCaller(t)
	// keel.Handle panics on bad input before it writes anything; turn that
	// into an error, since targets come from configuration.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("httptarget: %v", p)
		}
	}()
	keel.Handle(h, taskType, func(ctx context.Context, task *keel.Task[json.RawMessage]) error {
		return c.call(ctx, task)
	}, opts...)
	if t.Metrics != nil {
		t.Metrics.HTTPTarget(taskType)
	}
	return nil
}
