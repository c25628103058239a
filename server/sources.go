package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
)

// SourceRecord is what one broker source on one node last reported (GET
// /v1/sources, and the sources of GET /v1/stats).
type SourceRecord struct {
	Name string `json:"name"`
	Node string `json:"node"`
	Kind string `json:"kind"` // rabbitmq or nats
	Type string `json:"type"` // the task type its messages become
	// State is running, paused, backlog, waiting, connecting or stopped.
	State     string `json:"state"`
	LastError string `json:"last_error,omitempty"`
	// Counters since the source started on the node.
	Accepted  int64 `json:"accepted"`
	Duplicate int64 `json:"duplicate"`
	Rejected  int64 `json:"rejected"`
	Nacked    int64 `json:"nacked"`
	// AckP50 and AckP99 are the median and 99th percentile of the time
	// from a message's arrival to its ack.
	AckP50    Duration  `json:"ack_p50"`
	AckP99    Duration  `json:"ack_p99"`
	StartedAt time.Time `json:"started_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SourceList answers GET /v1/sources, by name then node.
type SourceList struct {
	Sources []SourceRecord `json:"sources"`
}

// Body encodings of a RejectedRecord.
const (
	bodyText   = "text"
	bodyBase64 = "base64"
)

// listBodyLimit is how much of each body GET /v1/rejected shows; GET
// /v1/rejected/{id} shows all that is stored.
const listBodyLimit = 64 << 10

// RejectedRecord is a message a broker source could not turn into a task.
type RejectedRecord struct {
	ID     int64  `json:"id"`
	Source string `json:"source"`
	Type   string `json:"type"`
	Queue  string `json:"queue,omitempty"`
	Key    string `json:"key"`
	Reason string `json:"reason"`
	// Body is the message's body as text when it is valid UTF-8, else in
	// standard base64: BodyEncoding says which ("text" or "base64").
	Body         string `json:"body"`
	BodyEncoding string `json:"body_encoding"`
	// Size is the whole body's length in bytes; Truncated says Body holds
	// less (bodies are stored up to 8 MiB, and a list shows 64 KiB of each).
	Size      int64               `json:"size"`
	Truncated bool                `json:"truncated,omitempty"`
	Headers   map[string][]string `json:"headers"`
	// ReceivedAt is when the source received the message.
	ReceivedAt time.Time `json:"received_at"`
	// ResubmittedAt and TaskID are set once the message became a task.
	ResubmittedAt *time.Time `json:"resubmitted_at,omitempty"`
	TaskID        int64      `json:"task_id,omitempty"`
}

// RejectedList answers GET /v1/rejected, newest first. Pass NextCursor as
// ?cursor= for the next page; it is empty on the last one.
type RejectedList struct {
	Rejected   []RejectedRecord `json:"rejected"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// ResubmitRequest is the optional body of POST /v1/rejected/{id}/resubmit:
// a payload replacing the stored body, and the natural key (default: read
// with the source's key spec).
type ResubmitRequest struct {
	Payload json.RawMessage `json:"payload,omitempty"`
	Key     string          `json:"key,omitempty" api:"nonempty"`
}

func sourceRecords(list []keel.SourceInfo) []SourceRecord {
	out := make([]SourceRecord, len(list))
	for i, s := range list {
		out[i] = SourceRecord{Name: s.Name, Node: s.Node, Kind: s.Kind, Type: s.Type, State: s.State, LastError: s.LastError,
			Accepted: s.Accepted, Duplicate: s.Duplicate, Rejected: s.Rejected, Nacked: s.Nacked,
			AckP50: Duration(s.AckP50), AckP99: Duration(s.AckP99), StartedAt: s.StartedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
	}
	return out
}

// rejectedRecord converts m, showing at most limit bytes of its body (0:
// all of it).
func rejectedRecord(m *keel.RejectedMessage, limit int) RejectedRecord {
	rec := RejectedRecord{ID: m.ID, Source: m.Source, Type: m.Type, Queue: m.Queue, Key: m.Key, Reason: m.Reason,
		Size: m.Size, Headers: m.Headers, ReceivedAt: m.ReceivedAt.UTC(), TaskID: m.TaskID}
	if rec.Headers == nil {
		rec.Headers = map[string][]string{}
	}
	rec.ResubmittedAt = optTime(m.ResubmittedAt)
	body := m.Body
	if limit > 0 && len(body) > limit {
		body = body[:limit]
		if utf8.Valid(m.Body) {
			// Cut text on a character boundary.
			for len(body) > 0 && !utf8.Valid(body) {
				body = body[:len(body)-1]
			}
		}
	}
	rec.Truncated = int64(len(body)) < m.Size
	if utf8.Valid(body) && bytes.IndexByte(body, 0) < 0 {
		rec.Body, rec.BodyEncoding = string(body), bodyText
	} else {
		rec.Body, rec.BodyEncoding = base64.StdEncoding.EncodeToString(body), bodyBase64
	}
	return rec
}

// listSources handles GET /v1/sources.
func (s *server) listSources(w http.ResponseWriter, r *http.Request) error {
	if _, err := queryParams(r); err != nil {
		return err
	}
	list, err := s.c.Sources(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SourceList{Sources: sourceRecords(list)})
	return nil
}

// listRejected handles GET /v1/rejected: rejected messages, newest first,
// a page at a time.
func (s *server) listRejected(w http.ResponseWriter, r *http.Request) error {
	q, err := queryParams(r, "source", "open", "before", "cursor", "limit")
	if err != nil {
		return err
	}
	f := keel.RejectedFilter{Source: q["source"]}
	if v, ok := q["open"]; ok {
		switch v {
		case "true":
			f.Open = true
		case "false":
		default:
			return badRequest("query parameter \"open\" must be true or false, got %q", shorten.String(v, 64))
		}
	}
	limit := defaultLimit
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return badRequest("query parameter \"limit\" must be an integer in 1..%d, got %q", maxLimit, shorten.String(v, 64))
		}
		limit = n
	}
	_, hasBefore := q["before"]
	_, hasCursor := q["cursor"]
	switch {
	case hasBefore && hasCursor:
		return badRequest("give query parameter \"cursor\" or \"before\", not both")
	case hasBefore:
		id, err := strconv.ParseInt(q["before"], 10, 64)
		if err != nil || id < 1 {
			return badRequest("query parameter \"before\" must be a positive message id, got %q", shorten.String(q["before"], 64))
		}
		f.Before = id
	case hasCursor:
		if f.Before, err = decodeCursor(q["cursor"]); err != nil {
			return err
		}
	}
	// One message more than the page tells whether another page follows.
	f.Limit = min(limit+1, maxLimit)
	list, err := s.c.Rejected(r.Context(), f)
	if err != nil {
		return err
	}
	more := len(list) > limit
	if more {
		list = list[:limit]
	} else if len(list) == maxLimit {
		probe := f
		probe.Before, probe.Limit = list[len(list)-1].ID, 1
		next, err := s.c.Rejected(r.Context(), probe)
		if err != nil {
			return err
		}
		more = len(next) > 0
	}
	out := RejectedList{Rejected: make([]RejectedRecord, len(list))}
	for i, m := range list {
		out.Rejected[i] = rejectedRecord(m, listBodyLimit)
	}
	if more {
		out.NextCursor = encodeCursor(list[len(list)-1].ID)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getRejected handles GET /v1/rejected/{id}: the message with all of its
// stored body.
func (s *server) getRejected(w http.ResponseWriter, r *http.Request) error {
	id, err := rejectedID(r)
	if err != nil {
		return err
	}
	m, err := s.c.GetRejected(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rejectedRecord(m, 0))
	return nil
}

// resubmitRejected handles POST /v1/rejected/{id}/resubmit: the message
// becomes a task (201), or was one already (200, duplicate set); 422 when
// it still cannot become one.
func (s *server) resubmitRejected(w http.ResponseWriter, r *http.Request) error {
	id, err := rejectedID(r)
	if err != nil {
		return err
	}
	var req ResubmitRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
			return err
		}
	}
	if string(req.Payload) == "null" {
		return badRequest("field \"payload\" is null: leave it out to resubmit the stored body")
	}
	info, err := s.c.ResubmitRejected(r.Context(), id, keel.Resubmit{Payload: req.Payload, Key: req.Key})
	switch {
	case errors.Is(err, keel.ErrInvalid), errors.Is(err, keel.ErrUnknownType), errors.Is(err, keel.ErrPayloadTooLarge):
		return &apiError{status: http.StatusUnprocessableEntity, detail: "cannot become a task: " + keelMessage(err)}
	case err != nil:
		return err
	}
	if info.Duplicate {
		writeJSON(w, http.StatusOK, taskFromInfo(info))
		return nil
	}
	w.Header().Set("Location", "/v1/tasks/"+strconv.FormatInt(info.ID, 10))
	writeJSON(w, http.StatusCreated, taskFromInfo(info))
	return nil
}

// deleteRejected handles DELETE /v1/rejected/{id}: it answers with the
// message as it was.
func (s *server) deleteRejected(w http.ResponseWriter, r *http.Request) error {
	id, err := rejectedID(r)
	if err != nil {
		return err
	}
	m, err := s.c.GetRejected(r.Context(), id)
	if err != nil {
		return err
	}
	if err := s.c.DeleteRejected(r.Context(), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rejectedRecord(m, listBodyLimit))
	return nil
}

// rejectedID checks that the request has no query parameters and parses
// the {id} path value of a rejected message.
func rejectedID(r *http.Request) (int64, error) {
	if _, err := queryParams(r); err != nil {
		return 0, err
	}
	return pathID(r, "rejected message")
}
