package dashboard

import (
	"net/http"
	"unicode/utf8"

	"github.com/keelq/keel/sequence"
)

// sequencesData is the list of sequences a dead member holds.
type sequencesData struct {
	Blocked []sequence.Blocked
	After   string // the key this page starts after; "": the first page
	Next    string // after of the next page; "": none
}

// sequences is GET /sequences: the sequence keys whose first member is
// dead, by key, a page at a time, with the members waiting behind each.
func (d *dash) sequences(w http.ResponseWriter, r *http.Request, v *viewer) error {
	data := sequencesData{After: r.URL.Query().Get("after")}
	if !utf8.ValidString(data.After) || len(data.After) > 255 {
		return badRequest("after must be a sequence key: at most 255 bytes of UTF-8")
	}
	list, err := sequence.ListBlocked(r.Context(), d.c, data.After, pageSize+1)
	if err != nil {
		return err
	}
	if len(list) > pageSize {
		list = list[:pageSize]
		data.Next = list[pageSize-1].Key
	}
	data.Blocked = list
	return d.render(w, r, http.StatusOK, "sequences", v, data)
}
