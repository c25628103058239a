package dashboard

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
)

// rejectedShown is how many rejected messages the sources page lists.
const rejectedShown = 100

// previewBytes is how much of a body the sources page shows.
const previewBytes = 160

// sourcesData is the sources page: every source's report, and the newest
// rejected messages.
type sourcesData struct {
	Sources  []keel.SourceInfo
	Rejected []rejectedRow
	Source   string // filter: one source's messages
	Open     bool   // filter: only those not resubmitted
	Older    int64  // the id to list older messages from, 0 when none
	Before   int64  // the page starts below this id (0: the newest)
	NoStore  bool   // the driver keeps no rejected messages
	Done     string
}

// rejectedRow is one rejected message in the list.
type rejectedRow struct {
	*keel.RejectedMessage
	Preview string // the start of the body, or what it is
}

// rejectedData is one rejected message's page.
type rejectedData struct {
	Msg     *keel.RejectedMessage
	Body    string // as text, or base64 when Binary
	Binary  bool
	Cut     bool // only the first part of the body was stored
	Headers []header
	Done    string
}

// header is one message header with its values.
type header struct {
	Name   string
	Values string
}

func (r rejectedData) title() string { return fmt.Sprintf("Rejected message %d", r.Msg.ID) }

// preview is the start of a body as text, or "binary, N bytes".
func preview(m *keel.RejectedMessage) string {
	if !utf8.Valid(m.Body) || strings.IndexByte(string(m.Body), 0) >= 0 {
		return fmt.Sprintf("(binary, %d bytes)", m.Size)
	}
	s := strings.Join(strings.Fields(string(m.Body)), " ")
	if len(s) > previewBytes || int64(len(m.Body)) < m.Size {
		return shorten.String(s, previewBytes) + " …"
	}
	return s
}

// sources is GET /sources: the broker sources and their rejected
// messages, newest first (?source=, ?open=true, ?before=).
func (d *dash) sources(w http.ResponseWriter, r *http.Request, v *viewer) error {
	q := r.URL.Query()
	data := sourcesData{Source: strings.TrimSpace(q.Get("source")), Open: q.Get("open") == "true", Done: doneMessage(q)}
	if s := q.Get("before"); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 {
			return badRequest("before must be a message id, a positive whole number, got %q", shorten.String(s, 32))
		}
		data.Before = id
	}
	var err error
	if data.Sources, err = d.c.Sources(r.Context()); err != nil {
		return err
	}
	list, err := d.c.Rejected(r.Context(), keel.RejectedFilter{Source: data.Source, Open: data.Open, Before: data.Before, Limit: rejectedShown + 1})
	switch {
	case errors.Is(err, keel.ErrWrongState):
		data.NoStore = true
	case err != nil:
		return err
	}
	if len(list) > rejectedShown {
		list = list[:rejectedShown]
		data.Older = list[len(list)-1].ID
	}
	for _, m := range list {
		data.Rejected = append(data.Rejected, rejectedRow{RejectedMessage: m, Preview: preview(m)})
	}
	return d.render(w, r, http.StatusOK, "sources", v, data)
}

// rejectedID reads the {id} of a rejected message's path.
func rejectedID(r *http.Request) (int64, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, badRequest("a rejected message id is a positive whole number, got %q", shorten.String(s, 32))
	}
	return id, nil
}

// rejectedMessage is GET /rejected/{id}: the message with its headers and
// whole stored body, and (for admin) the resubmit and delete forms.
func (d *dash) rejectedMessage(w http.ResponseWriter, r *http.Request, v *viewer) error {
	id, err := rejectedID(r)
	if err != nil {
		return err
	}
	m, err := d.c.GetRejected(r.Context(), id)
	if err != nil {
		return err
	}
	data := rejectedData{Msg: m, Cut: int64(len(m.Body)) < m.Size, Done: doneMessage(r.URL.Query())}
	if utf8.Valid(m.Body) && strings.IndexByte(string(m.Body), 0) < 0 {
		data.Body = string(m.Body)
	} else {
		data.Body, data.Binary = base64.StdEncoding.EncodeToString(m.Body), true
	}
	for name, vs := range m.Headers {
		data.Headers = append(data.Headers, header{Name: name, Values: strings.Join(vs, ", ")})
	}
	slices.SortFunc(data.Headers, func(a, b header) int { return strings.Compare(a.Name, b.Name) })
	return d.render(w, r, http.StatusOK, "rejected", v, data)
}

// resubmitRejected is POST /rejected/{id}/resubmit: the message becomes
// a task, as stored or with the posted payload (JSON) and key.
func (d *dash) resubmitRejected(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	id, err := rejectedID(r)
	if err != nil {
		return err
	}
	if err := form(w, r); err != nil {
		return err
	}
	var re keel.Resubmit
	if p := strings.TrimSpace(r.PostForm.Get("payload")); p != "" {
		if !json.Valid([]byte(p)) {
			return badRequest("the payload is not valid JSON: nothing was resubmitted")
		}
		re.Payload = json.RawMessage(p)
	}
	re.Key = strings.TrimSpace(r.PostForm.Get("key"))
	t, err := d.c.ResubmitRejected(r.Context(), id, re)
	switch {
	case errors.Is(err, keel.ErrInvalid), errors.Is(err, keel.ErrUnknownType), errors.Is(err, keel.ErrPayloadTooLarge):
		return userError{http.StatusUnprocessableEntity, "Cannot become a task",
			strings.TrimPrefix(err.Error(), keel.ErrInvalid.Error()+": ") + ". Nothing was changed: correct the payload or key on the message's page, or delete it."}
	case err != nil:
		return err
	}
	done := "resubmitted"
	if t.Duplicate {
		done = "resubmitted-before"
	}
	if r.PostForm.Get("back") == "message" {
		return d.back(w, r, "rejected/"+strconv.FormatInt(id, 10), done, strconv.FormatInt(t.ID, 10))
	}
	return d.back(w, r, "sources", done, strconv.FormatInt(t.ID, 10))
}

// deleteConfirm is the confirmation of a rejected message's deletion.
type deleteConfirm struct {
	Msg *keel.RejectedMessage
}

func (c deleteConfirm) title() string { return fmt.Sprintf("Delete rejected message %d?", c.Msg.ID) }

// deleteRejected is POST /rejected/{id}/delete: without confirm=yes it
// deletes nothing and asks, naming the message; with it, the message is
// deleted for good.
func (d *dash) deleteRejected(w http.ResponseWriter, r *http.Request, v *viewer) error {
	id, err := rejectedID(r)
	if err != nil {
		return err
	}
	if err := form(w, r); err != nil {
		return err
	}
	m, err := d.c.GetRejected(r.Context(), id)
	if err != nil {
		return err
	}
	if r.PostForm.Get("confirm") != "yes" {
		return d.render(w, r, http.StatusOK, "rejected_delete", v, deleteConfirm{Msg: m})
	}
	if err := d.c.DeleteRejected(r.Context(), id); err != nil {
		return err
	}
	return d.back(w, r, "sources", "rejected-deleted", strconv.FormatInt(id, 10))
}
