package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// writeJSON is the one place responses are written: v as JSON with status,
// as application/problem+json when v is a Problem.
func writeJSON(w http.ResponseWriter, status int, v any) {
	contentType := "application/json"
	if _, ok := v.(Problem); ok {
		contentType = "application/problem+json"
	}
	var b []byte
	var err error
	switch v := v.(type) {
	case Task: // every enqueue's answer (task_json.go)
		b, err = marshalTask(&v)
	default:
		b, err = json.Marshal(v)
	}
	if err != nil { // not expected for the wire types
		status, contentType = http.StatusInternalServerError, "application/problem+json"
		b = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500,"detail":"encoding the response failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n')) //nolint:errcheck // the client went away
}

// writeProblem answers with an RFC 9457 problem.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
}

// apiError is an error answered with its own status and detail.
type apiError struct {
	status int
	detail string
}

func (e *apiError) Error() string { return e.detail }

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, detail: fmt.Sprintf(format, args...)}
}

// retryAfterSeconds is the Retry-After of a 503 for an unreachable
// database: about as long as a database restart takes.
const retryAfterSeconds = 2

// fail answers err as a problem: keel's sentinel errors map to their
// status with keel's message, an unreachable database to 503 with
// Retry-After; anything else is a logged 500 with a generic detail.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		writeProblem(w, ae.status, ae.detail)
	case errors.Is(err, keel.ErrInvalid), errors.Is(err, keel.ErrUnknownType):
		writeProblem(w, http.StatusBadRequest, keelMessage(err))
	case errors.Is(err, keel.ErrPayloadTooLarge):
		writeProblem(w, http.StatusRequestEntityTooLarge, keelMessage(err))
	case errors.Is(err, keel.ErrIdempotencyConflict), errors.Is(err, keel.ErrWrongState):
		writeProblem(w, http.StatusConflict, keelMessage(err))
	case errors.Is(err, keel.ErrNotFound):
		writeProblem(w, http.StatusNotFound, keelMessage(err))
	case errors.Is(err, keel.ErrUnavailable), r.Context().Err() == nil && driver.Unreachable(err):
		// The second test is the fallback for an error a path of the
		// library did not classify (the drivers and the client do).
		s.log.Warn("keel server: database unavailable", "method", r.Method, "path", r.URL.Path, "error", err)
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		writeProblem(w, http.StatusServiceUnavailable, "the database is unavailable: retry later, with the same Idempotency-Key for an enqueue")
	case r.Context().Err() != nil && errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
		writeProblem(w, http.StatusServiceUnavailable, "request cancelled")
	default:
		s.log.Error("keel server: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		writeProblem(w, http.StatusInternalServerError, "internal error; the server log has the details")
	}
}

// keelMessage is err's text without keel's package prefixes, which mean
// nothing to an HTTP caller.
func keelMessage(err error) string {
	msg := strings.ReplaceAll(err.Error(), "keel: invalid input: ", "")
	msg = strings.ReplaceAll(msg, "keel: ", "")
	// The library's hint names Go configuration; over HTTP the remedy is
	// the server's own.
	msg = strings.ReplaceAll(msg, "register a handler or declare it in Config.Types", "this server accepts only the task types it is configured with")
	return strings.TrimPrefix(msg, "enqueue: ")
}
