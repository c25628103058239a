package server

import (
	"net/http"
	"time"

	"github.com/keelq/keel/sequence"
)

// BlockedSequence is a sequence key its dead first member holds.
type BlockedSequence struct {
	Key string `json:"key"`
	// DeadTask is the dead member; DeadSince when it died.
	DeadTask  int64     `json:"dead_task"`
	DeadSince time.Time `json:"dead_since"`
	// Waiting counts the members held behind it.
	Waiting int64 `json:"waiting"`
}

// BlockedSequenceList answers GET /v1/sequences/blocked; NextAfter, when
// set, is the after of the next page.
type BlockedSequenceList struct {
	Sequences []BlockedSequence `json:"sequences"`
	NextAfter string            `json:"next_after,omitempty"`
}

// listBlockedSequences handles GET /v1/sequences/blocked: by key, paged by
// after and limit.
func (s *server) listBlockedSequences(w http.ResponseWriter, r *http.Request) error {
	q, err := queryParams(r, "after", "limit")
	if err != nil {
		return err
	}
	limit, err := queryLimit(q)
	if err != nil {
		return err
	}
	bs, err := sequence.ListBlocked(r.Context(), s.c, q["after"], limit)
	if err != nil {
		return err
	}
	out := BlockedSequenceList{Sequences: make([]BlockedSequence, len(bs))}
	for i, b := range bs {
		out.Sequences[i] = BlockedSequence{Key: b.Key, DeadTask: b.DeadID, DeadSince: b.Since.UTC(), Waiting: b.Waiting}
	}
	if len(bs) == limit {
		out.NextAfter = bs[len(bs)-1].Key
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
