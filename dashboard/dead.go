package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/shorten"
)

// deadScan bounds how many of the newest dead letters the dead letter
// page reads to group them.
const deadScan = 1000

// deadShown is how many dead letters the page lists one by one.
const deadShown = 100

// minDeadAge is how long a dead letter is kept unless a purge is forced
// (seed 000 §3.2; the same rule as keel dlq purge --force).
const minDeadAge = keel.MinRetainDead

// maxCount bounds how many dead letters a confirmation counts.
const maxCount = 10 * deadScan

// deadData is the dead letter page.
type deadData struct {
	Type, Queue, After string
	Groups             []deadGroup
	Tasks              []*keel.TaskInfo // the newest, to select from
	Scanned            int              // how many were read to group
	Bounded            bool             // there may be more than were read
	Window, WindowTop  int64            // a type or queue filter grouped only tasks Window..WindowTop
	Done               string
}

// deadGroup is dead letters of one type with the same last error.
type deadGroup struct {
	Type, Error    string
	Count          int
	Newest, Oldest time.Time
	Example        int64
}

// lastError is the error a dead letter died of, on one line.
func lastError(t *keel.TaskInfo) string {
	if len(t.Errors) == 0 {
		return "(no error recorded)"
	}
	msg, _, _ := strings.Cut(t.Errors[len(t.Errors)-1].Error, "\n")
	return shorten.String(msg, 200)
}

// deadFilter reads the type, queue and finished-after filter.
func deadFilter(q interface{ Get(string) string }) (keel.Filter, error) {
	f := keel.Filter{State: keel.StateDead, Type: strings.TrimSpace(q.Get("type")), Queue: strings.TrimSpace(q.Get("queue"))}
	var err error
	f.FinishedAfter, err = parseTime("died after", q.Get("after"))
	return f, err
}

// dead is GET /dead: the newest dead letters grouped by type and error.
func (d *dash) dead(w http.ResponseWriter, r *http.Request, v *viewer) error {
	q := r.URL.Query()
	f, err := deadFilter(q)
	if err != nil {
		return err
	}
	f.Limit = deadScan
	lf := f // the listing reads a bounded window when filtered by type or queue
	from, to, err := d.window(r.Context(), &lf)
	if err != nil {
		return err
	}
	tasks, err := d.c.List(r.Context(), lf)
	if err != nil {
		return err
	}
	data := deadData{Type: f.Type, Queue: f.Queue, After: q.Get("after"), Scanned: len(tasks), Bounded: len(tasks) == deadScan, Done: doneMessage(q),
		Window: from, WindowTop: to}
	groups := map[[2]string]*deadGroup{}
	for _, t := range tasks {
		k := [2]string{t.Type, lastError(t)}
		g := groups[k]
		if g == nil {
			g = &deadGroup{Type: k[0], Error: k[1], Newest: t.FinishedAt, Example: t.ID}
			groups[k] = g
		}
		g.Count++
		g.Oldest = t.FinishedAt
	}
	for _, g := range groups {
		data.Groups = append(data.Groups, *g)
	}
	slices.SortFunc(data.Groups, func(a, b deadGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Type, b.Type), cmp.Compare(a.Error, b.Error))
	})
	data.Tasks = tasks[:min(len(tasks), deadShown)]
	return d.render(w, r, http.StatusOK, "dead", v, data)
}

// deadSelected is POST /dead/selected: requeue or purge the dead letters
// whose ids are posted (one or a selection).
func (d *dash) deadSelected(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	if err := form(w, r); err != nil {
		return err
	}
	action := r.PostForm.Get("action")
	if action != "requeue" && action != "purge" {
		return badRequest("action must be requeue or purge, got %q", shorten.String(action, 32))
	}
	var ids []int64
	for _, s := range r.PostForm["id"] {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id <= 0 {
			return badRequest("a task id is a positive whole number, got %q", shorten.String(s, 32))
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return badRequest("no dead letter selected: tick at least one")
	}
	if len(ids) > deadShown {
		return badRequest("at most %d dead letters at once; use requeue or purge by filter for more", deadShown)
	}
	ctx := r.Context()
	// Read them all first: a bad selection changes nothing.
	tasks := make([]*keel.TaskInfo, len(ids))
	for i, id := range ids {
		t, err := d.c.Get(ctx, id)
		if err != nil {
			return fmt.Errorf("read task %d: %w", id, err)
		}
		if t.State != keel.StateDead || t.Archived {
			return userError{http.StatusConflict, "Not a dead letter", fmt.Sprintf("Task %d is %s%s, not a dead letter: nothing was changed.", id, t.State, map[bool]string{true: " and archived"}[t.Archived])}
		}
		tasks[i] = t
	}
	// One bulk call by ids: it takes only those still dead when it runs,
	// and a purge without force only those dead for 7 days.
	f := keel.Filter{State: keel.StateDead, IDs: ids, Limit: len(ids)}
	if action == "purge" && r.PostForm.Get("force") != "yes" {
		week := d.now().Add(-minDeadAge)
		for _, t := range tasks {
			if t.FinishedAt.After(week) {
				return userError{http.StatusConflict, "Dead letter younger than 7 days",
					fmt.Sprintf("Task %d died %s: dead letters are kept at least 7 days. Tick \"also younger than 7 days\" to purge it anyway. Nothing was changed.", t.ID, ago(d.now(), t.FinishedAt))}
			}
		}
		f.FinishedBefore = week
	}
	if action == "requeue" {
		n, err := d.c.RetryMatching(ctx, f)
		if err != nil {
			return err
		}
		done := "requeued"
		if n < int64(len(tasks)) {
			done = "requeued-some"
		}
		return d.back(w, r, "dead", done, strconv.FormatInt(n, 10))
	}
	n, err := d.c.PurgeMatching(ctx, f)
	if err != nil {
		return err
	}
	return d.back(w, r, "dead", "purged", strconv.FormatInt(n, 10))
}

// confirmData is the confirmation of a requeue or purge by filter.
type confirmData struct {
	Action, Type, Queue, After string
	Force                      bool
	Cutoff                     int64 // Unix ms: only tasks dead before it
	Count                      int
	More                       bool // more than Count match
	KeptYoung                  bool // purge without force keeps the last 7 days
}

// deadMatching is POST /dead/matching: requeue or purge every dead letter
// matching a filter. Without confirm=yes it deletes nothing and shows how
// many match, with a button to go ahead.
func (d *dash) deadMatching(w http.ResponseWriter, r *http.Request, v *viewer) error {
	if err := form(w, r); err != nil {
		return err
	}
	f, err := deadFilter(r.PostForm)
	if err != nil {
		return err
	}
	c := confirmData{Action: r.PostForm.Get("action"), Type: f.Type, Queue: f.Queue, After: r.PostForm.Get("after"), Force: r.PostForm.Get("force") == "yes"}
	if c.Action != "requeue" && c.Action != "purge" {
		return badRequest("action must be requeue or purge, got %q", shorten.String(c.Action, 32))
	}
	// Only tasks dead before the confirmation page was shown: a requeued
	// task that dies again is not taken twice, and the count holds.
	cutoff := d.now()
	if s := r.PostForm.Get("cutoff"); s != "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms <= 0 {
			return badRequest("cutoff must be a time in Unix milliseconds, got %q", shorten.String(s, 32))
		}
		cutoff = time.UnixMilli(ms)
	}
	if c.Action == "purge" && !c.Force {
		if week := d.now().Add(-minDeadAge); week.Before(cutoff) {
			cutoff, c.KeptYoung = week, true
		}
	}
	c.Cutoff = cutoff.UnixMilli()
	f.FinishedBefore = cutoff
	if !f.FinishedAfter.IsZero() && !f.FinishedAfter.Before(f.FinishedBefore) {
		return userError{http.StatusConflict, "Nothing to " + c.Action,
			"Every dead letter after that time is younger than 7 days: nothing to purge unless you tick \"also younger than 7 days\"."}
	}
	ctx := r.Context()
	if r.PostForm.Get("confirm") != "yes" {
		if c.Count, c.More, err = d.countDead(r, f); err != nil {
			return err
		}
		return d.render(w, r, http.StatusOK, "confirm", v, c)
	}
	var n int64
	op := d.c.RetryMatching
	if c.Action == "purge" {
		op = d.c.PurgeMatching
	}
	for range 1000 {
		f.Limit = 1000
		got, err := op(ctx, f)
		if err != nil {
			return fmt.Errorf("%s dead letters (%d done before the error): %w", c.Action, n, err)
		}
		n += got
		if got == 0 {
			break
		}
	}
	return d.back(w, r, "dead", c.Action+"d", strconv.FormatInt(n, 10))
}

// countDead counts the dead letters f selects, reading at most maxCount.
func (d *dash) countDead(r *http.Request, f keel.Filter) (n int, more bool, err error) {
	f.Limit = deadScan
	for n < maxCount {
		page, err := d.c.List(r.Context(), f)
		if err != nil {
			return 0, false, err
		}
		n += len(page)
		if len(page) < f.Limit {
			return n, false, nil
		}
		f.BeforeID = page[len(page)-1].ID
	}
	return n, true, nil
}
