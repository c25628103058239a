// Package server is keel's HTTP API v1: enqueue and inspect tasks, manage
// dead letters, queues and task types, read stats, and see broker sources
// and resubmit or delete the messages they rejected, over JSON with
// errors as application/problem+json (RFC 9457). keel serve runs it; Go
// programs can mount the http.Handler that New returns in their own server.
//
// Every route is described by the OpenAPI 3.1 document served at
// GET /v1/openapi.json. Requests carry "Authorization: Bearer <token>";
// each token has a Role; without tokens only requests addressed to a
// loopback Host are answered. Browser-originated cross-origin state changes
// are rejected (http.CrossOriginProtection).
package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
	"github.com/keelq/keel/metrics"
)

// Role is what a token may do.
type Role string

// The roles. Admin may do everything; enqueue may add tasks (POST
// /v1/tasks, POST /v1/tasks/batch, POST /v1/batches and the batch calls
// that add members or seal) and read them back (GET /v1/tasks/{id});
// read may call every GET route under /v1 and GET /metrics.
const (
	RoleAdmin   Role = "admin"
	RoleEnqueue Role = "enqueue"
	RoleRead    Role = "read"
)

func (r Role) valid() bool { return r == RoleAdmin || r == RoleEnqueue || r == RoleRead }

// Token is one bearer token and its role.
type Token struct {
	Value string
	Role  Role
}

// DefaultMaxBodyBytes is the default Options.MaxBodyBytes: keel's default
// payload limit (1 MiB) plus 64 KiB for the rest of an enqueue request.
const DefaultMaxBodyBytes = 1<<20 + 64<<10

// Options configures the API. The zero value is valid: no authentication.
type Options struct {
	// Tokens are the accepted bearer tokens. Default none: every route is
	// open, but only to requests addressed to a loopback name or address
	// (Host localhost, 127.0.0.0/8 or [::1]), so that a web page whose
	// domain resolves to 127.0.0.1 cannot call it (DNS rebinding); keel
	// serve then listens on loopback only.
	Tokens []Token
	// MaxBodyBytes bounds a request body. It should exceed the client's
	// keel.Config.MaxPayloadBytes by room for the rest of the request, or
	// the largest payloads are refused. Default 1114112 (1 MiB of payload
	// plus 64 KiB).
	MaxBodyBytes int64
	// MaxBatch bounds the tasks of one POST /v1/tasks/batch, POST
	// /v1/batches or POST /v1/batches/{id}/tasks. Default 1000.
	MaxBatch int
	// Logger receives internal errors and failed readiness checks. Default
	// slog.Default().
	Logger *slog.Logger
	// Metrics, when set, counts every request in keel_api_requests_total
	// (by route pattern and status) and is served at GET /metrics, which
	// needs the read or admin role when Tokens are set. Default nil: GET
	// /metrics answers 404.
	Metrics *metrics.Collector
	// MetricsElsewhere leaves GET /metrics to a listener of its own (see
	// MetricsHandler): this handler answers it with 404 but still counts
	// its requests in Metrics. Default false.
	MetricsElsewhere bool
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1000
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

func (o Options) validate() error {
	if o.MaxBodyBytes < 0 {
		return fmt.Errorf("server: Options.MaxBodyBytes must be positive, got %d", o.MaxBodyBytes)
	}
	if o.MaxBatch < 0 {
		return fmt.Errorf("server: Options.MaxBatch must be positive, got %d", o.MaxBatch)
	}
	seen := map[string]int{}
	for i, t := range o.Tokens {
		switch {
		case t.Value == "":
			return fmt.Errorf("server: Options.Tokens[%d]: empty token value", i)
		case strings.ContainsFunc(t.Value, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			return fmt.Errorf("server: Options.Tokens[%d]: token value contains a space or control character", i)
		case !t.Role.valid():
			return fmt.Errorf("server: Options.Tokens[%d]: unknown role %q (use %q, %q or %q)", i, t.Role, RoleAdmin, RoleEnqueue, RoleRead)
		}
		if j, dup := seen[t.Value]; dup {
			return fmt.Errorf("server: Options.Tokens[%d]: same value as Tokens[%d]", i, j)
		}
		seen[t.Value] = i
	}
	return nil
}

// server holds the API's state; its methods are the route handlers.
type server struct {
	c     *keel.Client
	opts  Options
	log   *slog.Logger
	creds []credential
	mux   *http.ServeMux
}

// route is one entry of the API: a Go 1.22 method pattern, who may call
// it, and its handler, which returns an error to answer with a problem.
type route struct {
	pattern string
	access  access
	handle  func(w http.ResponseWriter, r *http.Request) error
}

// routes is the API. The OpenAPI document lists exactly these (a test
// checks it).
func (s *server) routes() []route {
	return []route{
		{"GET /healthz", public, s.healthz},
		{"GET /readyz", public, s.readyz},
		{"GET /v1/openapi.json", public, s.openapi},

		{"POST /v1/tasks", enqueuers, s.enqueue},
		{"POST /v1/tasks/batch", enqueuers, s.enqueueBatch},
		{"GET /v1/tasks/{id}", taskReaders, s.getTask},
		{"GET /v1/tasks", readers, s.listTasks},
		{"POST /v1/tasks/{id}/cancel", admins, s.cancelTask},
		{"POST /v1/tasks/{id}/retry", admins, s.retryTask},
		{"POST /v1/tasks/{id}/steps", enqueuers, s.saveStep},

		{"POST /v1/batches", enqueuers, s.createBatch},
		{"POST /v1/batches/{id}/tasks", enqueuers, s.addToBatch},
		{"POST /v1/batches/{id}/seal", enqueuers, s.sealBatch},
		{"GET /v1/batches/{id}", readers, s.getBatch},
		{"GET /v1/batches", readers, s.listBatches},
		{"GET /v1/batches/{id}/tasks", readers, s.batchMembers},
		{"POST /v1/workflows", enqueuers, s.createWorkflow},
		{"GET /v1/workflows/{id}", readers, s.getWorkflow},
		{"GET /v1/workflows", readers, s.listWorkflows},

		{"GET /v1/dead", readers, s.listDead},
		{"POST /v1/dead/requeue", admins, s.requeueDead},
		{"POST /v1/dead/purge", admins, s.purgeDead},

		{"GET /v1/queues", readers, s.listQueues},
		{"POST /v1/queues/{name}/pause", admins, s.pauseQueue},
		{"POST /v1/queues/{name}/resume", admins, s.resumeQueue},
		{"PATCH /v1/queues/{name}", admins, s.patchQueue},

		{"GET /v1/types", readers, s.listTypes},
		{"POST /v1/types/{name}/pause", admins, s.pauseType},
		{"POST /v1/types/{name}/resume", admins, s.resumeType},
		{"PATCH /v1/types/{name}", admins, s.patchType},
		{"GET /v1/types/{name}/ramp", readers, s.getRamp},
		{"PUT /v1/types/{name}/ramp", admins, s.startRamp},
		{"POST /v1/types/{name}/ramp/stop", admins, s.stopRamp},
		{"POST /v1/types/{name}/brake/close", admins, s.closeBrake},
		{"PUT /v1/types/{name}/brake", admins, s.setBrake},
		{"GET /v1/brakes", readers, s.listBrakes},
		{"GET /v1/sequences/blocked", readers, s.listBlockedSequences},

		{"GET /v1/stats", readers, s.stats},
		{"GET /v1/nodes", readers, s.nodes},
		{"GET /v1/system", readers, s.system},

		{"GET /v1/alerts", readers, s.listAlerts},
		{"GET /v1/alerts/{id}", readers, s.getAlert},
		{"GET /v1/alerts/rules", readers, s.alertRules},
		{"PATCH /v1/alerts/rules", admins, s.patchAlertRules},
		{"DELETE /v1/alerts/rules", admins, s.resetAlertRules},
		{"POST /v1/drill", admins, s.drill},

		{"GET /v1/schedules", readers, s.listSchedules},
		{"POST /v1/schedules/{name}/pause", admins, s.pauseSchedule},
		{"POST /v1/schedules/{name}/resume", admins, s.resumeSchedule},
		{"POST /v1/schedules/{name}/trigger", admins, s.triggerSchedule},
		{"DELETE /v1/schedules/{name}", admins, s.deleteSchedule},

		{"GET /v1/sources", readers, s.listSources},
		{"GET /v1/rejected", readers, s.listRejected},
		{"GET /v1/rejected/{id}", readers, s.getRejected},
		{"POST /v1/rejected/{id}/resubmit", admins, s.resubmitRejected},
		{"DELETE /v1/rejected/{id}", admins, s.deleteRejected},

		{metricsRoute, readers, s.metrics},
	}
}

// New returns the API v1 handler for c. It rejects invalid Options: an
// empty or duplicate token value, or an unknown role. The handler serves
// absolute paths (/v1/..., /healthz, /readyz) and answers Location headers
// with them: mount it at the root of a server or mux, without
// http.StripPrefix. A server whose workers run in other processes usually
// builds c with keel.Config.AnyType, so that any valid task type can be
// enqueued.
func New(c *keel.Client, o Options) (http.Handler, error) {
	s, err := newServer(c, o)
	if err != nil {
		return nil, err
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusForbidden, "cross-origin request rejected: browsers may not change state through this API from another origin")
	}))
	if o.Metrics == nil {
		return cop.Handler(s), nil
	}
	for _, rt := range s.routes() {
		o.Metrics.APIRoute(rt.pattern)
	}
	return s.counted(cop.Handler(s)), nil
}

func newServer(c *keel.Client, o Options) (*server, error) {
	if c == nil {
		return nil, errors.New("server: nil keel.Client")
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &server{c: c, opts: o, log: o.Logger, creds: credentials(o.Tokens), mux: http.NewServeMux()}
	for _, rt := range s.routes() {
		s.mux.Handle(rt.pattern, s.guard(rt))
	}
	return s, nil
}

// guard authenticates and authorizes a request for rt, then runs it.
func (s *server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.access != public {
			role, ok := s.authenticate(r)
			if !ok {
				w.Header().Set("WWW-Authenticate", "Bearer")
				writeProblem(w, http.StatusUnauthorized, "missing or unknown bearer token: send Authorization: Bearer <token>")
				return
			}
			if !rt.access.allows(role) {
				writeProblem(w, http.StatusForbidden, fmt.Sprintf("role %q may not call %s", role, rt.pattern))
				return
			}
		}
		if err := rt.handle(w, r); err != nil {
			s.fail(w, r, err)
		}
	})
}

// ServeHTTP dispatches to the mux, answering its 404 and 405 with problems
// and any panic with a generic 500.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(s.creds) == 0 && !LoopbackHost(r.Host) {
		writeProblem(w, http.StatusForbidden, fmt.Sprintf("Host %q is not a loopback name or address: without tokens this API answers only requests to localhost, 127.0.0.1 or [::1] (so that no web page can reach it through DNS rebinding); configure tokens to serve other hosts", shorten.String(r.Host, 64)))
		return
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("keel server: panic in handler", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			writeProblem(w, http.StatusInternalServerError, "internal error")
		}
	}()
	if _, pattern := s.mux.Handler(r); pattern == "" {
		// Not found or method not allowed: learn which from the mux, answer
		// with a problem.
		rec := &headerRecorder{header: http.Header{}}
		s.mux.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			allow := rec.header.Get("Allow")
			w.Header().Set("Allow", allow)
			writeProblem(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s is not allowed on %s; allowed: %s", shorten.String(r.Method, 64), shorten.String(r.URL.Path, 128), allow))
			return
		}
		writeProblem(w, http.StatusNotFound, fmt.Sprintf("no route %s %s: see /v1/openapi.json", shorten.String(r.Method, 64), shorten.String(r.URL.Path, 128)))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// LoopbackHost reports whether host, a request's Host with or without a
// port, names this machine: localhost, an address in 127.0.0.0/8, or ::1.
// Without tokens the API (and the dashboard) answer only such requests.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(host, ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}

// headerRecorder keeps the status and headers a handler writes and drops
// its body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }
func (h *headerRecorder) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(b), nil
}
func (h *headerRecorder) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}
