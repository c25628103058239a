package server

import (
	"context"
	"net/http"
	"time"

	"github.com/keelq/keel"
)

// listDead handles GET /v1/dead: dead letters, newest first, a page at a
// time.
func (s *server) listDead(w http.ResponseWriter, r *http.Request) error {
	q, err := queryParams(r, "type", "queue", "finished_after", "finished_before", "cursor", "limit")
	if err != nil {
		return err
	}
	p := keel.Filter{State: keel.StateDead, Type: q["type"], Queue: q["queue"]}
	if err := queryFinished(q, &p); err != nil {
		return err
	}
	list, err := s.listPage(r.Context(), p, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// requeueDead handles POST /v1/dead/requeue: BulkRequest → BulkResponse.
func (s *server) requeueDead(w http.ResponseWriter, r *http.Request) error {
	return s.bulkDead(w, r, s.c.RetryMatching)
}

// purgeDead handles POST /v1/dead/purge: BulkRequest → BulkResponse.
func (s *server) purgeDead(w http.ResponseWriter, r *http.Request) error {
	return s.bulkDead(w, r, s.c.PurgeMatching)
}

// bulkDead applies op to the tasks a BulkRequest's filter matches.
func (s *server) bulkDead(w http.ResponseWriter, r *http.Request, op func(context.Context, keel.Filter) (int64, error)) error {
	f, err := s.decodeFilter(w, r)
	if err != nil {
		return err
	}
	n, err := op(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, BulkResponse{Count: n})
	return nil
}

// decodeFilter reads a BulkRequest; keel validates the filter.
func (s *server) decodeFilter(w http.ResponseWriter, r *http.Request) (keel.Filter, error) {
	var req BulkRequest
	if err := decodeJSON(w, r, s.opts.MaxBodyBytes, &req); err != nil {
		return keel.Filter{}, err
	}
	f := keel.Filter{State: keel.State(req.State), Type: req.Type, Queue: req.Queue, Limit: req.Limit, IDs: req.IDs}
	f.FinishedAfter = valueOr(req.FinishedAfter, time.Time{})
	f.FinishedBefore = valueOr(req.FinishedBefore, time.Time{})
	if req.Limit < 0 {
		// keel reads 0 as its default; a negative limit is a caller's mistake.
		return keel.Filter{}, badRequest("field \"limit\" must be in 1..10000, got %d", req.Limit)
	}
	return f, nil
}

func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
