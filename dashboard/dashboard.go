// Package dashboard is keel's web dashboard: server-rendered HTML pages
// (overview, queues and types, tasks, task detail, batches, workflows, dead letters, alerts,
// nodes, schedules, broker sources and their rejected messages) over a keel.Client, with every file it needs embedded in the
// binary. keel serve mounts it at "/"; a Go program can mount the handler
// New returns in its own server.
//
// It takes the same tokens and roles as the HTTP API (package server): a
// login form turns a token into a signed session cookie; the read and
// enqueue roles see the pages without their action buttons and are
// refused on every action; admin may act. Without tokens it answers only
// requests addressed to a loopback Host, like the API. Every response
// carries a Content-Security-Policy without inline script or style, and
// every state change is a POST behind http.CrossOriginProtection.
package dashboard

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
	"github.com/keelq/keel/server"
)

// Options configures the dashboard. The zero value is valid: no login,
// loopback requests only, mounted at "/".
type Options struct {
	// Tokens are the accepted tokens, the same as server.Options.Tokens:
	// a token's role decides what its session may do. Default none: no
	// login, every request is admin, but only requests addressed to a
	// loopback name or address are answered (DNS rebinding).
	Tokens []server.Token
	// Logger receives internal errors. Default slog.Default().
	Logger *slog.Logger
	// Prefix is the path the dashboard is mounted at, starting and ending
	// with "/": it serves paths under it (without http.StripPrefix), and
	// its links and session cookie use it. Default "/".
	Prefix string
	// Now is the clock, for tests. Default time.Now.
	Now func() time.Time
	// window overrides searchWindow, for tests.
	window int64
}

// CSP is the Content-Security-Policy of every response: scripts and
// styles only from the dashboard's own files, no inline code.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// dash holds the dashboard's state; its methods are the page handlers.
type dash struct {
	c      *keel.Client
	opts   Options
	log    *slog.Logger
	prefix string
	auth   *sessions
	mux    *http.ServeMux
	now    func() time.Time
}

// New returns the dashboard's handler for c. It rejects invalid Options:
// an empty or duplicate token value, an unknown role, or a prefix that
// does not start and end with "/".
func New(c *keel.Client, o Options) (http.Handler, error) {
	if c == nil {
		return nil, errors.New("dashboard: nil keel.Client")
	}
	if o.Prefix == "" {
		o.Prefix = "/"
	}
	if !strings.HasPrefix(o.Prefix, "/") || !strings.HasSuffix(o.Prefix, "/") {
		return nil, fmt.Errorf("dashboard: Options.Prefix must start and end with /, got %q", o.Prefix)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	auth, err := newSessions(o.Tokens)
	if err != nil {
		return nil, err
	}
	d := &dash{c: c, opts: o, log: o.Logger, prefix: o.Prefix, auth: auth, mux: http.NewServeMux(), now: o.Now}
	d.routes()
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.errorPage(w, r, http.StatusForbidden, "Cross-origin request refused",
			"This action came from another web site. The dashboard accepts changes only from its own pages: open it directly and try again.")
	}))
	return d.secure(cop.Handler(d.mux)), nil
}

// access says who may use a route.
type access uint8

const (
	public  access = iota // no session needed (login, static files)
	viewers               // any role
	admins                // admin only
)

// route registers pattern (a method and a path under the prefix, without
// its leading slash) with its access.
func (d *dash) route(method, path string, a access, h func(w http.ResponseWriter, r *http.Request, v *viewer) error) {
	d.mux.Handle(method+" "+d.prefix+path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := d.auth.viewer(r, d.now())
		if a != public && v == nil {
			if r.Method == http.MethodGet && r.Header.Get("HX-Request") == "" {
				http.Redirect(w, r, d.prefix+"login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			if r.Header.Get("HX-Request") != "" {
				w.Header().Set("HX-Redirect", d.prefix+"login")
			}
			d.errorPage(w, r, http.StatusUnauthorized, "Please log in", "Your session ended or you are not logged in.")
			return
		}
		if a == admins && !v.Admin() {
			d.errorPage(w, r, http.StatusForbidden, "Not allowed",
				fmt.Sprintf("Your token's role %q may look but not change anything: this action needs an admin token.", v.Role))
			return
		}
		if v == nil {
			v = &viewer{}
		}
		if err := h(w, r, v); err != nil {
			d.fail(w, r, err)
		}
	}))
}

// routes registers every page and action.
func (d *dash) routes() {
	d.route("GET", "static/{version}/{file...}", public, d.static)
	d.route("GET", "login", public, d.loginPage)
	d.route("POST", "login", public, d.login)
	d.route("POST", "logout", public, d.logout)

	d.route("GET", "{$}", viewers, d.overview)
	d.route("GET", "live", viewers, d.overviewLive)
	d.route("GET", "history.json", viewers, d.historyJSON)
	d.route("GET", "queues", viewers, d.queues)
	d.route("POST", "queues/{name}", admins, d.updateQueue)
	d.route("POST", "types/{name}", admins, d.updateType)
	d.route("POST", "types/{name}/ramp", admins, d.rampType)
	d.route("POST", "types/{name}/brake/close", admins, d.closeBrake)
	d.route("GET", "tasks", viewers, d.tasks)
	d.route("GET", "tasks/{id}", viewers, d.task)
	d.route("POST", "tasks/{id}/cancel", admins, d.cancelTask)
	d.route("POST", "tasks/{id}/retry", admins, d.retryTask)
	d.route("GET", "batches", viewers, d.batches)
	d.route("GET", "batches/{id}", viewers, d.batch)
	d.route("GET", "sequences", viewers, d.sequences)
	d.route("GET", "workflows", viewers, d.workflows)
	d.route("GET", "workflows/{id}", viewers, d.workflowPage)
	d.route("GET", "dead", viewers, d.dead)
	d.route("POST", "dead/selected", admins, d.deadSelected)
	d.route("POST", "dead/matching", admins, d.deadMatching)
	d.route("GET", "alerts", viewers, d.alerts)
	d.route("GET", "nodes", viewers, d.nodes)
	d.route("GET", "schedules", viewers, d.schedules)
	d.route("POST", "schedules/{name}", admins, d.updateSchedule)
	d.route("GET", "sources", viewers, d.sources)
	d.route("GET", "rejected/{id}", viewers, d.rejectedMessage)
	d.route("POST", "rejected/{id}/resubmit", admins, d.resubmitRejected)
	d.route("POST", "rejected/{id}/delete", admins, d.deleteRejected)
	d.route("GET", "", public, d.notFound)
}

// secure sets the security headers of every response, answers only
// loopback Hosts without tokens, and turns a panic into a 500 page.
func (d *dash) secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", CSP)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Frame-Options", "DENY")
		if !d.auth.enabled() && !server.LoopbackHost(r.Host) {
			d.errorPage(w, r, http.StatusForbidden, "Not a loopback address",
				fmt.Sprintf("Host %q is not a loopback name or address: without tokens the dashboard answers only requests to localhost, 127.0.0.1 or [::1], so that no web page can reach it through DNS rebinding. Configure tokens to serve other hosts.", shorten.String(r.Host, 64)))
			return
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				d.log.Error("keel dashboard: panic in handler", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				d.errorPage(w, r, http.StatusInternalServerError, "Internal error", "The dashboard hit a bug; the server log has the details.")
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// fail answers a handler's error: bad input and missing tasks in words,
// anything else as a logged internal error.
func (d *dash) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ue userError
	switch {
	case errors.As(err, &ue):
		d.errorPage(w, r, ue.status, ue.title, ue.msg)
	case errors.Is(err, keel.ErrNotFound):
		d.errorPage(w, r, http.StatusNotFound, "Not found", err.Error())
	case errors.Is(err, keel.ErrInvalid):
		d.errorPage(w, r, http.StatusBadRequest, "Invalid input", err.Error())
	case errors.Is(err, keel.ErrWrongState), errors.Is(err, keel.ErrIdempotencyConflict):
		d.errorPage(w, r, http.StatusConflict, "Not possible now", err.Error())
	case errors.Is(err, keel.ErrUnavailable):
		d.log.Warn("keel dashboard: database unavailable", "path", r.URL.Path, "err", err)
		d.errorPage(w, r, http.StatusServiceUnavailable, "Database unavailable", "The database did not answer: "+err.Error()+". The page will work again once it does.")
	default:
		d.log.Error("keel dashboard: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		d.errorPage(w, r, http.StatusInternalServerError, "Internal error", "Something went wrong reading or changing the data; the server log has the details.")
	}
}

// userError is an error shown to the user as it is.
type userError struct {
	status     int
	title, msg string
}

func (e userError) Error() string { return e.title + ": " + e.msg }

func badRequest(format string, args ...any) error {
	return userError{http.StatusBadRequest, "Invalid input", fmt.Sprintf(format, args...)}
}

func (d *dash) notFound(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	return userError{http.StatusNotFound, "Page not found", fmt.Sprintf("There is no page at %s. Use the menu above.", shorten.String(r.URL.Path, 128))}
}
