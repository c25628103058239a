package server

import (
	"errors"
	"net/http"

	"github.com/keelq/keel/metrics"
)

// routeUnmatched is the route label of requests no route matched.
const routeUnmatched = "unmatched"

// metricsRoute serves the metrics: on the API (Options.Metrics) or on a
// listener of its own (MetricsHandler).
const metricsRoute = "GET /metrics"

// metrics handles GET /metrics: Options.Metrics in the Prometheus text
// format, or 404 when this handler does not serve them.
func (s *server) metrics(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Metrics == nil || s.opts.MetricsElsewhere {
		return &apiError{status: http.StatusNotFound, detail: "metrics are not served here: see keel serve's [metrics] configuration"}
	}
	w.Header().Set("X-Content-Type-Options", "nosniff") // as every other answer
	s.opts.Metrics.Handler().ServeHTTP(w, r)
	return nil
}

// MetricsHandler returns a handler that serves only GET /metrics from m,
// for a listener of its own (keel serve's [metrics] listen), under the
// same rules as the API: with o.Tokens it needs a token of role read or
// admin; without, it answers only requests addressed to a loopback Host.
// Its requests are not counted in keel_api_requests_total. It rejects a
// nil m and the invalid Options New rejects.
func MetricsHandler(m *metrics.Collector, o Options) (http.Handler, error) {
	if m == nil {
		return nil, errors.New("server: MetricsHandler: nil metrics.Collector")
	}
	o = o.withDefaults()
	o.Metrics, o.MetricsElsewhere = m, false
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &server{opts: o, log: o.Logger, creds: credentials(o.Tokens), mux: http.NewServeMux()}
	s.mux.Handle(metricsRoute, s.guard(route{metricsRoute, readers, s.metrics}))
	return s, nil
}

// counted counts every request h answers in keel_api_requests_total, by
// the pattern of the route the mux picks for it.
func (s *server) counted(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := s.mux.Handler(r)
		if pattern == "" {
			pattern = routeUnmatched
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() { s.opts.Metrics.APIRequest(pattern, sw.code()) }()
		h.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status answered: 200 when the handler wrote nothing.
func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
