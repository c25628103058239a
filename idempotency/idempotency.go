// Package idempotency is net/http middleware that makes a handler
// idempotent by the request's Idempotency-Key header, with its state in
// keel's database (table keel_idempotency, through the driver).
//
// A request with the header runs once per scope (by default its method
// and path) and key:
//
//   - The first runs the handler; a response with a status below 500 is
//     stored until the key expires (Options.TTL).
//   - A replay of the same request (same method, path and body) gets the
//     stored status, headers and body, with the header
//     Idempotent-Replayed: true; the handler does not run.
//   - A duplicate that arrives while the first still runs gets 409
//     Conflict with Retry-After: 1; the client retries and then gets the
//     replay.
//   - The same key with another request (another body) gets 422.
//   - A 5xx response or a panic releases the key, so a retry runs the
//     handler again.
//   - A response larger than Options.MaxBody is sent as it is and the key
//     released (it is not stored); a request body larger than MaxBody gets
//     413.
//
// Requests without the header pass through untouched. A header value
// must be 1 to 255 printable ASCII characters, else the request gets 400.
// Errors are problem+json (RFC 9457).
//
// If the process running the first request dies, its key stays in flight
// until Options.Lock passes; then the same request takes it over and runs.
// Keep Lock above the handler's longest run.
//
// Expired rows stay in the table until Purge deletes them: call it
// periodically (for example from a keel schedule or a ticker).
package idempotency

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/keelq/keel/driver"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader is set to "true" on a replayed response.
const ReplayedHeader = "Idempotent-Replayed"

// Options configure a Middleware. Zero fields take their defaults.
type Options struct {
	// TTL is how long a key and its stored response are kept. Default 24h.
	TTL time.Duration
	// Lock is how long a first request holds its key while it runs,
	// before a duplicate may take it over (the first's process is
	// presumed dead). At most TTL. Default 5m.
	Lock time.Duration
	// MaxBody bounds the request body read for the digest and the
	// response body stored for replay, in bytes. Default 1 MiB.
	MaxBody int64
	// Scope returns the scope of a request's key: one key in two scopes
	// is two entries. Scopes longer than 255 bytes are hashed. Default:
	// the method and the path ("POST /orders").
	Scope func(*http.Request) string
	// Logger receives the errors a response cannot carry (storing or
	// releasing a key). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Middleware makes handlers idempotent; see the package documentation.
type Middleware struct {
	store driver.IdempotencyStore
	opts  Options
}

// New returns a middleware storing its keys through drv (for a keel
// client, client.Driver()). It fails when drv does not implement
// driver.IdempotencyStore or an option is out of range.
func New(drv driver.Driver, opts Options) (*Middleware, error) {
	store, ok := drv.(driver.IdempotencyStore)
	if !ok {
		return nil, fmt.Errorf("idempotency: driver %T does not store idempotent requests (driver.IdempotencyStore)", drv)
	}
	if opts.TTL == 0 {
		opts.TTL = 24 * time.Hour
	}
	if opts.Lock == 0 {
		opts.Lock = min(5*time.Minute, opts.TTL)
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = 1 << 20
	}
	if opts.Scope == nil {
		opts.Scope = func(r *http.Request) string { return r.Method + " " + r.URL.Path }
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch {
	case opts.TTL < 0:
		return nil, fmt.Errorf("idempotency: TTL must be positive, got %v", opts.TTL)
	case opts.Lock < 0 || opts.Lock > opts.TTL:
		return nil, fmt.Errorf("idempotency: Lock must be in (0, TTL=%v], got %v", opts.TTL, opts.Lock)
	case opts.MaxBody < 0:
		return nil, fmt.Errorf("idempotency: MaxBody must be positive, got %d", opts.MaxBody)
	}
	return &Middleware{store: store, opts: opts}, nil
}

// Purge deletes the keys that expired and returns how many.
func (m *Middleware) Purge(ctx context.Context) (int64, error) {
	n, err := m.store.PurgeRequests(ctx, m.opts.Now())
	if err != nil {
		return 0, fmt.Errorf("idempotency: %w", err)
	}
	return n, nil
}

// Handler returns h made idempotent.
func (m *Middleware) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		values := r.Header.Values(Header)
		if len(values) == 0 {
			h.ServeHTTP(w, r)
			return
		}
		key := values[0]
		if len(values) > 1 || !validKey(key) {
			problem(w, http.StatusBadRequest, "Bad Idempotency-Key", "the Idempotency-Key header must appear once, with 1 to 255 printable ASCII characters")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, m.opts.MaxBody+1))
		if err != nil {
			problem(w, http.StatusBadRequest, "Unreadable body", "reading the request body: "+err.Error())
			return
		}
		if int64(len(body)) > m.opts.MaxBody {
			problem(w, http.StatusRequestEntityTooLarge, "Body too large", fmt.Sprintf("an idempotent request's body is at most %d bytes", m.opts.MaxBody))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))

		scope := m.opts.Scope(r)
		if len(scope) == 0 || len(scope) > 255 {
			sum := sha256.Sum256([]byte(scope))
			scope = "sha256:" + hex.EncodeToString(sum[:])
		}
		owner := newOwner()
		out, stored, err := m.store.BeginRequest(r.Context(), driver.BeginRequestParams{
			Scope: scope, Key: key, Digest: digest(r, body), Owner: owner,
			Now: m.opts.Now(), TTL: m.opts.TTL, Lock: m.opts.Lock,
		})
		if err != nil {
			m.opts.Logger.Error("idempotency: begin request", "scope", scope, "key", key, "err", err)
			w.Header().Set("Retry-After", "1")
			problem(w, http.StatusServiceUnavailable, "Idempotency store unavailable", "the request was not run; retry it")
			return
		}
		switch out {
		case driver.BeginDone:
			replay(w, stored)
			return
		case driver.BeginInFlight:
			w.Header().Set("Retry-After", "1")
			problem(w, http.StatusConflict, "Request in progress", "a request with this Idempotency-Key is still running; retry it later")
			return
		case driver.BeginMismatch:
			problem(w, http.StatusUnprocessableEntity, "Idempotency-Key reused", "this Idempotency-Key was used for a different request")
			return
		}
		m.run(w, r, h, scope, key, owner)
	})
}

// run runs the first request, then stores its response or releases the key.
func (m *Middleware) run(w http.ResponseWriter, r *http.Request, h http.Handler, scope, key, owner string) {
	rec := &recorder{w: w, max: m.opts.MaxBody, status: http.StatusOK}
	// A context that outlives the request's: storing must happen even when
	// the client went away.
	ctx := context.WithoutCancel(r.Context())
	release := func() {
		if _, err := m.store.ReleaseRequest(ctx, scope, key, owner); err != nil {
			m.opts.Logger.Error("idempotency: release key", "scope", scope, "key", key, "err", err)
		}
	}
	done := false
	defer func() {
		if !done { // a panic, re-panicked after this
			release()
		}
	}()
	h.ServeHTTP(rec, r)
	done = true
	if rec.passed {
		release() // too large to store: already sent
		return
	}
	// The response is stored (or the key released) before it is sent: a
	// process that dies in between leaves a stored response the client's
	// retry replays, never a response the client saw and a key a retry
	// runs again; and a client that retries at once after a 5xx finds
	// the key free.
	defer rec.flush()
	if rec.status >= 500 {
		release()
		return
	}
	headers, err := json.Marshal(storedHeaders(rec.Header()))
	if err != nil {
		m.opts.Logger.Error("idempotency: encode headers", "scope", scope, "key", key, "err", err)
		release()
		return
	}
	ok, err := m.store.FinishRequest(ctx, driver.FinishRequestParams{Scope: scope, Key: key, Owner: owner,
		Response: driver.StoredResponse{Status: rec.status, Headers: headers, Body: rec.buf.Bytes()}})
	if err != nil {
		m.opts.Logger.Error("idempotency: store response", "scope", scope, "key", key, "err", err)
		release()
		return
	}
	if !ok {
		m.opts.Logger.Warn("idempotency: key taken over before the response was stored (handler ran longer than Options.Lock?)", "scope", scope, "key", key)
	}
}

// recorder buffers the response (up to max bytes) so that it can be
// stored; past max it sends what it has and passes the rest through.
type recorder struct {
	w           http.ResponseWriter
	max         int64
	status      int
	wroteHeader bool
	buf         bytes.Buffer
	passed      bool
}

func (rec *recorder) Header() http.Header { return rec.w.Header() }

func (rec *recorder) WriteHeader(status int) {
	if rec.wroteHeader {
		return
	}
	rec.wroteHeader = true
	rec.status = status
}

func (rec *recorder) Write(p []byte) (int, error) {
	if !rec.wroteHeader {
		rec.WriteHeader(http.StatusOK)
	}
	if rec.passed {
		return rec.w.Write(p)
	}
	if int64(rec.buf.Len()+len(p)) > rec.max {
		rec.passed = true
		rec.flush()
		return rec.w.Write(p)
	}
	return rec.buf.Write(p)
}

// flush sends the status and the buffered body.
func (rec *recorder) flush() {
	rec.w.WriteHeader(rec.status)
	if rec.buf.Len() > 0 {
		_, _ = rec.w.Write(rec.buf.Bytes())
	}
}

// hopByHop are the headers not stored for replay.
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Date": true, ReplayedHeader: true,
}

func storedHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		if !hopByHop[http.CanonicalHeaderKey(k)] {
			out[k] = v
		}
	}
	return out
}

func replay(w http.ResponseWriter, resp *driver.StoredResponse) {
	var h http.Header
	if len(resp.Headers) > 0 {
		_ = json.Unmarshal(resp.Headers, &h) // stored by us; a bad row replays without headers
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Set(ReplayedHeader, "true")
	w.Header().Set("Content-Length", strconv.Itoa(len(resp.Body)))
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// digest is the SHA-256 of the method, the path and the body.
func digest(r *http.Request, body []byte) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%d\n", r.Method, r.URL.Path, len(body))
	h.Write(body)
	return h.Sum(nil)
}

func validKey(k string) bool {
	if len(k) == 0 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail})
}
