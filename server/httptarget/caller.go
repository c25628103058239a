package httptarget

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/tracing"
)

const (
	// userAgent is sent with every request.
	userAgent = "keel"
	// snippetBytes is how much of an error response's body goes into the
	// error message.
	snippetBytes = 200
	// drainBytes is how much more of an error response's body is read so
	// that the connection can be reused.
	drainBytes = 64 << 10
	// maxRetryAfter caps the delay a Retry-After header can ask for.
	maxRetryAfter = 24 * time.Hour
)

// caller POSTs tasks to one Target through one shared http.Client.
type caller struct {
	t      Target
	url    string      // t.URL, as configured
	shown  string      // the URL for messages: no userinfo, query or fragment
	host   string      // host:port for connect errors
	header http.Header // the static request headers
	client *http.Client
}

// newCaller builds the caller for a validated target.
func newCaller(t Target) *caller {
	u, _ := url.Parse(t.URL) // validated
	shown := *u
	shown.User, shown.RawQuery, shown.ForceQuery, shown.Fragment, shown.RawFragment = nil, "", false, "", ""

	header := http.Header{}
	for k, v := range t.Headers {
		header.Set(k, v)
	}
	header.Set("Content-Type", "application/json")
	if header.Get("User-Agent") == "" {
		header.Set("User-Agent", userAgent)
	}

	dialer := &net.Dialer{Timeout: t.ConnectTimeout, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   t.ConnectTimeout,
		ResponseHeaderTimeout: t.ReadTimeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   100,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
	}
	return &caller{
		t: t, url: t.URL, shown: shown.String(), host: host, header: header,
		client: &http.Client{
			Transport: transport,
			// A redirect means the binding points at the wrong URL: report
			// it rather than following it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// idempotencyKey identifies a task, the same on every attempt.
func idempotencyKey(id int64) string { return "keel-task-" + strconv.FormatInt(id, 10) }

// requestHeader is the static headers and the task's own: its id,
// attempt, delivery, the claim's fencing token (the same number: a step
// posted to POST /v1/tasks/{id}/steps with it is stored only while this
// claim holds), type, queue and idempotency key. The map is made at its
// final size (room for the trace context too) and the task's values share
// one array; the static values are shared, capped so that an Add copies
// them.
func (c *caller) requestHeader(task *keel.Task[json.RawMessage]) http.Header {
	h := make(http.Header, len(c.header)+9)
	for k, v := range c.header {
		h[k] = v[:len(v):len(v)]
	}
	delivery := strconv.FormatInt(task.Delivery, 10)
	v := [...]string{strconv.FormatInt(task.ID, 10), strconv.Itoa(task.Attempt), delivery, delivery,
		task.Type, task.Queue, idempotencyKey(task.ID)}
	for i, k := range taskHeaders {
		h[k] = v[i : i+1 : i+1]
	}
	return h
}

// taskHeaders name requestHeader's values, in canonical form.
var taskHeaders = [...]string{"Keel-Task-Id", "Keel-Attempt", "Keel-Delivery", "Keel-Fence", "Keel-Task-Type",
	"Keel-Queue", "Idempotency-Key"}

// call runs one attempt of task: POST the payload, map the response or the
// failure to the task's outcome.
func (c *caller) call(ctx context.Context, task *keel.Task[json.RawMessage]) error {
	a := &attempt{c: c}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer a.stop()
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { a.connected(cancel) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				a.advance(phaseSent)
			}
		},
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(rctx, trace), http.MethodPost, c.url, bytes.NewReader(task.Payload))
	if err != nil {
		return keel.Permanent(fmt.Errorf("build request for %s: %w", c.shown, err))
	}
	req.Header = c.requestHeader(task)
	// The attempt's span: the target continues the task's trace.
	tracing.ToHeaders(ctx, propagation.HeaderCarrier(req.Header))

	code := 0 // the answer's status; 0: none came
	if m := c.t.Metrics; m != nil {
		start := time.Now()
		defer func() { m.HTTPTargetRequest(task.Type, code, time.Since(start)) }()
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return a.fail(ctx, err)
	}
	code = resp.StatusCode
	defer resp.Body.Close()
	a.advance(phaseHeaders)

	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		body, err := io.ReadAll(io.LimitReader(resp.Body, c.t.MaxResultBytes+1))
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body) // the whole response must arrive
		}
		if err != nil {
			return a.fail(ctx, err)
		}
		if len(body) > 0 && int64(len(body)) <= c.t.MaxResultBytes && json.Valid(body) {
			return task.SetResult(json.RawMessage(body))
		}
		return nil
	}
	return c.statusError(resp)
}

// statusError maps a response other than 2xx to the task's outcome: 408,
// 429 and 5xx retry (after Retry-After when given); 3xx, other 4xx and
// anything else dead-letter the task.
func (c *caller) statusError(resp *http.Response) error {
	// The status decides; a body that fails to arrive does not matter.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, snippetBytes))
	io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes)) //nolint:errcheck // only helps reuse the connection

	code := resp.StatusCode
	if code >= 300 && code <= 399 {
		where := "no Location"
		if loc := resp.Header.Get("Location"); loc != "" {
			where = fmt.Sprintf("Location %q", loc)
		}
		return keel.Permanent(fmt.Errorf("HTTP %d from %s (%s): redirects are not followed; bind the task type to the final URL",
			code, c.shown, where))
	}
	msg := fmt.Sprintf("HTTP %d from %s", code, c.shown)
	if s := strings.TrimSpace(strings.ToValidUTF8(string(snippet), "\uFFFD")); s != "" {
		msg += ": " + s
	}
	err := errors.New(msg)
	if code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || (code >= 500 && code <= 599) {
		now := time.Now()
		if date, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			now = date // Retry-After dates are in the target's clock
		}
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), now); ok {
			return keel.RetryAfter(err, d)
		}
		return err
	}
	return keel.Permanent(err)
}

// parseRetryAfter reads a Retry-After value: delta-seconds or an HTTP-date
// (relative to now). It caps the delay at 24h and reports false for a
// missing, invalid or past value.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(maxRetryAfter/time.Second) { // only overflow fails here
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := at.Sub(now)
	if d < 0 {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

// Phases of an attempt, in order; a failure is reported by the phase it
// happened in.
const (
	phaseConnecting int32 = iota // dialing, TLS handshake
	phaseConnected               // connection ready, request being written
	phaseSent                    // request written, waiting for the response
	phaseHeaders                 // response headers received, reading the body
)

// attempt tracks one request's progress and its read deadline.
type attempt struct {
	c        *caller
	phase    atomic.Int32
	armed    atomic.Bool
	timer    atomic.Pointer[time.Timer]
	timedOut atomic.Bool
}

// errReadTimeout ends a request whose response did not arrive in time.
var errReadTimeout = errors.New("httptarget: read timeout")

// connected starts the read deadline once a connection is ready: the
// request must be sent and the whole response read within ReadTimeout.
func (a *attempt) connected(cancel context.CancelCauseFunc) {
	a.advance(phaseConnected)
	if a.armed.CompareAndSwap(false, true) {
		a.timer.Store(time.AfterFunc(a.c.t.ReadTimeout, func() {
			a.timedOut.Store(true)
			cancel(errReadTimeout)
		}))
	}
}

// advance moves the phase forward to p (never back).
func (a *attempt) advance(p int32) {
	for {
		old := a.phase.Load()
		if old >= p || a.phase.CompareAndSwap(old, p) {
			return
		}
	}
}

func (a *attempt) stop() {
	if t := a.timer.Load(); t != nil {
		t.Stop()
	}
}

// fail describes a request that failed without a usable response, by what
// went wrong: read timeout, the task's context ending, connect timeout or
// error, or a broken connection. All of these are retried.
func (a *attempt) fail(taskCtx context.Context, err error) error {
	c, ph := a.c, a.phase.Load()
	if a.timedOut.Load() {
		what := "no response"
		switch {
		case ph < phaseSent:
			what = "request not fully sent"
		case ph >= phaseHeaders:
			what = "body incomplete"
		}
		return &callError{msg: fmt.Sprintf("read timeout after %v: %s (POST %s)", c.t.ReadTimeout, what, c.shown),
			err: err, timeout: true}
	}
	if taskCtx.Err() != nil {
		return fmt.Errorf("POST %s stopped while %s: %w", c.shown, phaseDoing(ph), context.Cause(taskCtx))
	}
	return describeError(c, ph, err)
}

// describeError words a transport error err that happened in phase ph.
func describeError(c *caller, ph int32, err error) error {
	timeout := isTimeout(err)
	var msg string
	switch {
	case ph < phaseConnected && timeout:
		msg = fmt.Sprintf("connect timeout after %v (POST %s)", c.t.ConnectTimeout, c.shown)
	case ph < phaseConnected:
		msg = fmt.Sprintf("connect to %s: %s", c.host, causeText(err))
	case timeout && ph >= phaseHeaders:
		msg = fmt.Sprintf("read timeout after %v: body incomplete (POST %s)", c.t.ReadTimeout, c.shown)
	case timeout:
		msg = fmt.Sprintf("read timeout after %v: no response (POST %s)", c.t.ReadTimeout, c.shown)
	default:
		msg = fmt.Sprintf("POST %s: connection failed while %s: %s", c.shown, phaseDoing(ph), causeText(err))
	}
	return &callError{msg: msg, err: err, timeout: timeout}
}

// callError is a failed request worded for the task's history. It keeps
// the transport error (errors.Is and errors.As see it) and says whether
// the request timed out: Timeout() is what keel reads to record the
// attempt with outcome timeout rather than error.
type callError struct {
	msg     string
	err     error
	timeout bool
}

func (e *callError) Error() string { return e.msg }
func (e *callError) Unwrap() error { return e.err }

// Timeout reports whether the request timed out (connect or read).
func (e *callError) Timeout() bool { return e.timeout }

func phaseDoing(ph int32) string {
	switch ph {
	case phaseConnecting:
		return "connecting"
	case phaseConnected:
		return "sending the request"
	case phaseSent:
		return "waiting for the response"
	default:
		return "reading the response body"
	}
}

// isTimeout reports whether err is a network timeout (dial, TLS
// handshake, response headers, reads).
func isTimeout(err error) bool {
	var ne net.Error
	return (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, os.ErrDeadlineExceeded)
}

// causeText strips the layers Go adds ("Post \"url\": dial tcp addr:
// connect: ") so that the message says what happened, such as
// "connection refused".
func causeText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}
