package dashboard

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
	"github.com/keelq/keel/workflow"
)

// pageSize is how many tasks the task list shows at once.
const pageSize = 50

// searchWindow is how many task ids one page of a list filtered by type
// or queue reads at most. Those filters have no index of their own (one
// would cost every claim and finish on PostgreSQL), so they walk the ids
// backwards; the window keeps a page fast on a table of millions, and
// the page offers to search the next window.
const searchWindow = 200_000

// tasksData is the task list.
type tasksData struct {
	State, Type, Queue, After, Before string
	// Exclude is the types left out, as typed; Own is "1" when keel's own
	// tasks (types keel.*, queue keel) are shown, and OwnHidden tells
	// whether this list left them out.
	Exclude, Own string
	OwnHidden    bool
	Tasks        []*keel.TaskInfo
	Next         int64 // BeforeID of the next page; 0: none
	First        bool  // no BeforeID: the newest tasks
	// Window: a type or queue filter searched only ids Window..WindowTop;
	// Older is the cursor that searches below it (0: nothing is below).
	Window, WindowTop, Older int64
}

// reservedPrefix starts the type of every task of keel's own.
const reservedPrefix = "keel."

// names splits a comma-separated list of names, dropping spaces around
// them and empty entries; the client checks each.
func names(s string) []string {
	var out []string
	for n := range strings.SplitSeq(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// parseTime reads a form time: RFC 3339, "2006-01-02T15:04" (an HTML
// datetime-local, UTC) or a date; empty: zero.
func parseTime(name, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badRequest("%s must be a time such as 2026-01-31T14:00 (UTC) or 2026-01-31, got %q", name, s)
}

// tasks is GET /tasks: tasks newest first, filtered, a page at a time
// (keyset pagination on the id); ?id= opens one task, ?key= the task
// holding an idempotency key (Client.GetByKey).
func (d *dash) tasks(w http.ResponseWriter, r *http.Request, v *viewer) error {
	q := r.URL.Query()
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil || n <= 0 {
			return badRequest("a task id is a positive whole number, got %q", id)
		}
		http.Redirect(w, r, d.prefix+"tasks/"+strconv.FormatInt(n, 10), http.StatusSeeOther)
		return nil
	}
	if key := q.Get("key"); strings.TrimSpace(key) != "" {
		t, err := d.c.GetByKey(r.Context(), key)
		if errors.Is(err, keel.ErrNotFound) {
			return userError{http.StatusNotFound, "No task holds that key",
				fmt.Sprintf("No pending, running or succeeded task has the idempotency key %q. Dead and cancelled tasks release their key, "+
					"archived tasks are not searched, and a UniqueBy natural key cannot be looked up (keel stores a digest of it with the payload).", shorten.String(key, 100))}
		}
		if err != nil {
			return err
		}
		http.Redirect(w, r, d.prefix+"tasks/"+strconv.FormatInt(t.ID, 10), http.StatusSeeOther)
		return nil
	}
	data := tasksData{State: q.Get("state"), Type: q.Get("type"), Queue: q.Get("queue"), After: q.Get("after"), Before: q.Get("before"),
		Exclude: q.Get("exclude_type"), Own: q.Get("own")}
	f := keel.Filter{State: keel.State(data.State), Queue: data.Queue, ExcludeTypes: names(data.Exclude), Limit: pageSize + 1}
	// One type is an exact filter; a list or a prefix ("email.*") any of them.
	if ts := names(data.Type); len(ts) > 1 || len(ts) == 1 && strings.HasSuffix(ts[0], "*") {
		f.Types = ts
	} else {
		f.Type = strings.TrimSpace(data.Type)
	}
	var err error
	if f.CreatedAfter, err = parseTime("created after", data.After); err != nil {
		return err
	}
	if f.CreatedBefore, err = parseTime("created before", data.Before); err != nil {
		return err
	}
	if s := q.Get("cursor"); s != "" {
		if f.BeforeID, err = strconv.ParseInt(s, 10, 64); err != nil || f.BeforeID <= 0 {
			return badRequest("cursor must be a task id, got %q", s)
		}
	}
	data.First = f.BeforeID == 0
	if data.Window, data.WindowTop, err = d.window(r.Context(), &f); err != nil {
		return err
	}
	// Keel's own tasks (alert deliveries, on_dead follow-ups, the drill)
	// are left out unless asked for or named by the filter. They are few,
	// so leaving them out alone needs no window of ids.
	if data.Own == "" && !strings.HasPrefix(strings.TrimSpace(data.Type), reservedPrefix) && data.Queue != keel.ReservedQueue {
		data.OwnHidden = true
		f.ExcludeTypes = append(f.ExcludeTypes, reservedPrefix+"*")
		f.ExcludeQueues = []string{keel.ReservedQueue}
	}
	if data.Tasks, err = d.c.List(r.Context(), f); err != nil {
		return err
	}
	switch {
	case len(data.Tasks) > pageSize:
		data.Tasks = data.Tasks[:pageSize]
		data.Next = data.Tasks[pageSize-1].ID
	case f.AfterID > 0:
		data.Older = f.AfterID + 1 // ids at or below the window's bottom
	}
	return d.render(w, r, http.StatusOK, "tasks", v, data)
}

// window bounds a list filtered by type or queue (which has no index of
// its own) to searchWindow ids below f.BeforeID, or below the newest task,
// by setting f.AfterID; it returns the ids searched, zero when the list is
// not bounded.
func (d *dash) window(ctx context.Context, f *keel.Filter) (from, to int64, err error) {
	if f.Type == "" && f.Queue == "" && f.Types == nil && f.ExcludeTypes == nil && f.ExcludeQueues == nil {
		return 0, 0, nil
	}
	top := f.BeforeID
	if top == 0 {
		newest, err := d.c.List(ctx, keel.Filter{Limit: 1})
		if err != nil {
			return 0, 0, err
		}
		if len(newest) > 0 {
			top = newest[0].ID + 1
		}
	}
	window := cmp.Or(d.opts.window, searchWindow)
	if top <= window+1 {
		return 0, 0, nil
	}
	f.AfterID = top - 1 - window
	return f.AfterID + 1, top - 1, nil
}

// taskData is the task detail page.
type taskData struct {
	Task     *keel.TaskInfo
	Payload  string
	Result   string
	Meta     string
	Estimate *keel.Estimate
	Timeline []event
	Done     string
	// Workflow is the workflow the task belongs to (nil: none).
	Workflow *workflow.Info
}

func (t taskData) title() string { return fmt.Sprintf("Task %d", t.Task.ID) }

// event is one line of a task's timeline.
type event struct {
	At       time.Time
	End      time.Time
	What     string
	Class    string // a state, for the colour
	Node     string
	Error    string
	Stack    string
	Duration time.Duration
}

// pretty indents JSON; other bytes are shown as they are.
func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// timeline lists what happened to t: arrival, each recorded failed
// attempt, the current or successful attempt, the finish.
func timeline(t *keel.TaskInfo) []event {
	ev := []event{{At: t.CreatedAt, What: "created", Class: "pending"}}
	for i, e := range t.Errors {
		class := "retrying"
		switch {
		case e.Outcome == keel.OutcomeCancelled:
			class = "cancelled"
		case i == len(t.Errors)-1 && t.State == keel.StateDead:
			class = "dead"
		}
		ev = append(ev, event{At: e.Start, End: e.End, What: fmt.Sprintf("attempt %d: %s", e.Attempt, e.Outcome), Class: class,
			Node: e.Node, Error: e.Error, Stack: e.Stack, Duration: e.End.Sub(e.Start)})
	}
	switch t.State {
	case keel.StateRunning:
		ev = append(ev, event{At: t.AttemptedAt, What: fmt.Sprintf("attempt %d: running", t.Attempt), Class: "running", Node: t.Node})
	case keel.StateSucceeded:
		if !t.AttemptedAt.IsZero() {
			ev = append(ev, event{At: t.AttemptedAt, End: t.FinishedAt, What: fmt.Sprintf("attempt %d: succeeded", t.Attempt), Class: "succeeded", Node: t.Node,
				Duration: t.FinishedAt.Sub(t.AttemptedAt)})
		}
	case keel.StatePending:
		what := "waiting to run"
		if t.Attempt > 0 {
			what = "waiting to retry"
		}
		ev = append(ev, event{At: t.RunAt, What: what + " (run at)", Class: "pending"})
	}
	if !t.FinishedAt.IsZero() {
		ev = append(ev, event{At: t.FinishedAt, What: "finished: " + string(t.State), Class: string(t.State)})
	}
	if t.Archived {
		ev = append(ev, event{At: t.ArchivedAt, What: "archived", Class: "cancelled"})
	}
	return ev
}

// task is GET /tasks/{id}: one task's whole story.
func (d *dash) task(w http.ResponseWriter, r *http.Request, v *viewer) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	t, err := d.c.Get(r.Context(), id)
	if errors.Is(err, keel.ErrNotFound) {
		return userError{http.StatusNotFound, "Task not found", fmt.Sprintf("There is no task %d. It may have been purged, or archived and then deleted.", id)}
	}
	if err != nil {
		return err
	}
	data := taskData{Task: t, Payload: pretty(t.Payload), Result: pretty(t.Result), Meta: pretty(t.Meta), Timeline: timeline(t), Done: doneMessage(r.URL.Query())}
	if t.State == keel.StatePending && !t.Held {
		if data.Estimate, err = d.c.Estimate(r.Context(), t); err != nil {
			return err
		}
	}
	if wf, err := workflow.Of(r.Context(), d.c, id); err == nil {
		data.Workflow = wf
	} else if !errors.Is(err, keel.ErrNotFound) && !errors.Is(err, keel.ErrWrongState) {
		return err
	}
	return d.render(w, r, http.StatusOK, "task", v, data)
}

func taskID(r *http.Request) (int64, error) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("a task id is a positive whole number, got %q", s)
	}
	return id, nil
}

// cancelTask is POST /tasks/{id}/cancel.
func (d *dash) cancelTask(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	if _, err := d.c.Cancel(r.Context(), id); err != nil {
		return err
	}
	return d.back(w, r, "tasks/"+strconv.FormatInt(id, 10), "cancelled", "")
}

// retryTask is POST /tasks/{id}/retry.
func (d *dash) retryTask(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	if _, err := d.c.Retry(r.Context(), id); err != nil {
		return err
	}
	return d.back(w, r, "tasks/"+strconv.FormatInt(id, 10), "retried", "")
}
