package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
	"github.com/keelq/keel/internal/shorten"
)

// batchesData is the batch list.
type batchesData struct {
	Unfinished string // "1": only batches not finished yet
	Batches    []*batch.Info
	Next       int64 // before_id of the next page; 0: none
	First      bool  // no before_id: the newest batches
}

// batches is GET /batches: batches newest first, a page at a time (keyset
// pagination on the id), optionally only the unfinished ones. It shows
// what batch.List gives, a single indexed read: the final counts of a
// finished batch, only the total of one not finished yet. Counting an
// unfinished batch's members reads all of them, so the live counts are on
// the batch's own page, not fifty times here.
func (d *dash) batches(w http.ResponseWriter, r *http.Request, v *viewer) error {
	q := r.URL.Query()
	data := batchesData{Unfinished: q.Get("unfinished")}
	if data.Unfinished != "" && data.Unfinished != "1" {
		return badRequest("unfinished must be 1 or left out, got %q", shorten.String(data.Unfinished, 32))
	}
	before, err := idParam(q.Get("before_id"), "before_id")
	if err != nil {
		return err
	}
	data.First = before == 0
	list, err := batch.List(r.Context(), d.c, batch.Filter{Unfinished: data.Unfinished == "1", BeforeID: before, Limit: pageSize + 1})
	if err != nil {
		return err
	}
	if len(list) > pageSize {
		list = list[:pageSize]
		data.Next = list[pageSize-1].ID
	}
	data.Batches = list
	return d.render(w, r, http.StatusOK, "batches", v, data)
}

// batchData is a batch's page.
type batchData struct {
	Batch   *batch.Info
	Members []*keel.TaskInfo
	After   int64 // after_id of this page of members; 0: the first
	Next    int64 // after_id of the next page; 0: none
}

func (b batchData) title() string { return fmt.Sprintf("Batch %d", b.Batch.ID) }

// batch is GET /batches/{id}: a batch's live counts by state, its
// progress, ETA, times and callbacks, and a page of its members by id.
func (d *dash) batch(w http.ResponseWriter, r *http.Request, v *viewer) error {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return badRequest("a batch id is a positive whole number, got %q", shorten.String(s, 32))
	}
	after, err := idParam(r.URL.Query().Get("after_id"), "after_id")
	if err != nil {
		return err
	}
	b, err := batch.Get(r.Context(), d.c, id)
	if errors.Is(err, keel.ErrNotFound) {
		return userError{http.StatusNotFound, "Batch not found", fmt.Sprintf("There is no batch %d.", id)}
	}
	if err != nil {
		return err
	}
	data := batchData{Batch: b, After: after}
	if data.Members, err = batch.Members(r.Context(), d.c, id, after, pageSize+1); err != nil {
		return err
	}
	if len(data.Members) > pageSize {
		data.Members = data.Members[:pageSize]
		data.Next = data.Members[pageSize-1].ID
	}
	return d.render(w, r, http.StatusOK, "batch", v, data)
}

// idParam reads an optional id from the query: a positive whole number,
// or 0 when left out.
func idParam(s, name string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("%s must be a positive whole number, got %q", name, shorten.String(s, 32))
	}
	return n, nil
}
