package dashboard

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/keelq/keel"
)

// queuesData is the queues and types page.
type queuesData struct {
	Queues []queueRow
	Types  map[string]keel.TypeInfo // settings by type name
	Ramps  map[string]*keel.RampState
	Done   string // what the last action changed
	// Braked are the types whose automatic brake is open or half open;
	// Fallbacks the types with a brake that ever opened or an on_dead.
	Braked, Fallbacks []keel.TypeInfo
}

type queueRow struct {
	keel.QueueStats
	Concurrency int
	Rate        float64
	Burst       int
}

// queues is GET /queues: every queue and its types with their settings.
func (d *dash) queues(w http.ResponseWriter, r *http.Request, v *viewer) error {
	ctx := r.Context()
	st, err := d.c.Stats(ctx)
	if err != nil {
		return err
	}
	qs, err := d.c.Queues(ctx)
	if err != nil {
		return err
	}
	ts, err := d.c.Types(ctx)
	if err != nil {
		return err
	}
	info := map[string]keel.QueueInfo{}
	for _, q := range qs {
		info[q.Name] = q
	}
	data := queuesData{Types: map[string]keel.TypeInfo{}, Ramps: map[string]*keel.RampState{}, Done: doneMessage(r.URL.Query())}
	seen := map[string]bool{}
	for _, q := range st.Queues {
		i := info[q.Name]
		data.Queues = append(data.Queues, queueRow{QueueStats: q, Concurrency: i.Concurrency, Rate: i.Rate, Burst: i.Burst})
		seen[q.Name] = true
	}
	for _, q := range qs { // configured or with settings, but no tasks yet
		if !seen[q.Name] && q.Name != keel.ReservedQueue { // keel's own: on the overview and nodes page
			data.Queues = append(data.Queues, queueRow{QueueStats: keel.QueueStats{Name: q.Name, Paused: q.Paused},
				Concurrency: q.Concurrency, Rate: q.Rate, Burst: q.Burst})
		}
	}
	for _, t := range ts {
		data.Types[t.Name] = t
		ramp, err := d.c.GetRamp(ctx, t.Name)
		switch {
		case err == nil:
			data.Ramps[t.Name] = ramp
		case !errors.Is(err, keel.ErrNotFound) && !errors.Is(err, keel.ErrInvalid):
			return err
		}
		if t.Brake.State == keel.BrakeOpen || t.Brake.State == keel.BrakeHalfOpen {
			data.Braked = append(data.Braked, t)
		}
		if t.Brake.State != "" || t.OnDead != "" {
			data.Fallbacks = append(data.Fallbacks, t)
		}
	}
	return d.render(w, r, http.StatusOK, "queues", v, data)
}

// closeBrake is POST /types/{name}/brake/close: close the type's open
// brake by hand.
func (d *dash) closeBrake(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	if err := form(w, r); err != nil {
		return err
	}
	name := r.PathValue("name")
	if _, err := d.c.CloseBrake(r.Context(), name); err != nil {
		return err
	}
	return d.back(w, r, "queues", "brake", name)
}

// form reads a small form body.
func form(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		return badRequest("could not read the form: %v", err)
	}
	return nil
}

// pausedField reads the pause/resume buttons: op=pause or op=resume.
func pausedField(r *http.Request) *bool {
	switch r.PostForm.Get("op") {
	case "pause":
		t := true
		return &t
	case "resume":
		f := false
		return &f
	}
	return nil
}

// intField reads an optional integer field; empty: nil.
func intField(r *http.Request, name string) (*int, error) {
	s := strings.TrimSpace(r.PostForm.Get(name))
	if s == "" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil, badRequest("%s must be a whole number, got %q", name, s)
	}
	return &n, nil
}

// floatField reads an optional number field; empty: nil.
func floatField(r *http.Request, name string) (*float64, error) {
	s := strings.TrimSpace(r.PostForm.Get(name))
	if s == "" {
		return nil, nil
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, badRequest("%s must be a number, got %q", name, s)
	}
	return &x, nil
}

// durField reads an optional duration field ("30s", "0" clears); empty: nil.
func durField(r *http.Request, name string) (*time.Duration, error) {
	s := strings.TrimSpace(r.PostForm.Get(name))
	if s == "" {
		return nil, nil
	}
	if s == "0" {
		var z time.Duration
		return &z, nil
	}
	x, err := time.ParseDuration(s)
	if err != nil {
		return nil, badRequest("%s must be a duration such as 30s, 5m or 1h (0 clears it), got %q", name, s)
	}
	return &x, nil
}

// updateQueue is POST /queues/{name}: pause, resume or set concurrency.
func (d *dash) updateQueue(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	if err := form(w, r); err != nil {
		return err
	}
	name := r.PathValue("name")
	u := keel.QueueUpdate{Paused: pausedField(r)}
	var err error
	if u.Paused == nil {
		if u.Concurrency, err = intField(r, "concurrency"); err != nil {
			return err
		}
		if u.Rate, err = floatField(r, "rate"); err != nil {
			return err
		}
		if u.Burst, err = intField(r, "burst"); err != nil {
			return err
		}
	}
	if _, err := d.c.UpdateQueue(r.Context(), name, u); err != nil {
		return err
	}
	return d.back(w, r, "queues", "queue", name)
}

// updateType is POST /types/{name}: pause, resume, or change concurrency,
// timeout, max attempts and backoff.
func (d *dash) updateType(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	if err := form(w, r); err != nil {
		return err
	}
	name := r.PathValue("name")
	u := keel.TypeUpdate{Paused: pausedField(r)}
	if u.Paused == nil {
		var err error
		if u.Concurrency, err = intField(r, "concurrency"); err != nil {
			return err
		}
		if u.Rate, err = floatField(r, "rate"); err != nil {
			return err
		}
		if u.Burst, err = intField(r, "burst"); err != nil {
			return err
		}
		if u.MaxAttempts, err = intField(r, "max_attempts"); err != nil {
			return err
		}
		if u.Timeout, err = durField(r, "timeout"); err != nil {
			return err
		}
		if u.BackoffBase, err = durField(r, "backoff_base"); err != nil {
			return err
		}
		if u.BackoffMax, err = durField(r, "backoff_max"); err != nil {
			return err
		}
	}
	if _, err := d.c.UpdateType(r.Context(), name, u); err != nil {
		return err
	}
	return d.back(w, r, "queues", "type", name)
}

// rampType is POST /types/{name}/ramp: op=stop stops the type's ramp;
// otherwise steps ("1,2,5,10") and every ("10m", empty: the default)
// start one.
func (d *dash) rampType(w http.ResponseWriter, r *http.Request, _ *viewer) error {
	if err := form(w, r); err != nil {
		return err
	}
	name := r.PathValue("name")
	if r.PostForm.Get("op") == "stop" {
		if _, err := d.c.StopRamp(r.Context(), name); err != nil {
			return err
		}
		return d.back(w, r, "queues", "ramp-stopped", name)
	}
	var ramp keel.Ramp
	for _, f := range strings.Split(r.PostForm.Get("steps"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return badRequest("steps must be rising whole numbers such as 1,2,5,10, got %q", r.PostForm.Get("steps"))
		}
		ramp.Steps = append(ramp.Steps, n)
	}
	every, err := durField(r, "every")
	if err != nil {
		return err
	}
	if every != nil {
		if ramp.Every = *every; ramp.Every == 0 {
			// keel reads 0 as its default: refuse it here, quoting it.
			return badRequest("every must be in 1s..168h, got %q: no interval (leave it empty for the default 10m)", r.PostForm.Get("every"))
		}
	}
	if _, err := d.c.StartRamp(r.Context(), name, ramp); err != nil {
		return err
	}
	return d.back(w, r, "queues", "ramp", name)
}

// back redirects after a successful action to path, saying what was done
// (see doneMessage).
func (d *dash) back(w http.ResponseWriter, r *http.Request, path, done, arg string) error {
	http.Redirect(w, r, d.prefix+path+query("done", done, "n", arg), http.StatusSeeOther)
	return nil
}

// doneMessages are what an action tells after its redirect; the link
// carries only a code and a name or number, so that nobody can make the
// page say something else.
var doneMessages = map[string]string{
	"queue":        "Queue %s updated; every node applies it within seconds.",
	"type":         "Type %s updated; every node applies it within seconds.",
	"ramp":         "Ramp of type %s started at its first step; the leader raises it while failures stay low.",
	"ramp-stopped": "Ramp of type %s stopped; its concurrency stays.",
	"cancelled":    "Task cancelled.",
	"retried":      "Task sent back to pending: it runs again now, its attempts reset.",
	"requeued":     "Requeued %s dead letters: they run again now.",
	"brake":        "The brake of type %s is closed: its tasks are claimed again.",
	"requeued-some": "Requeued %s of the selected dead letters: they run again now. The others stay dead: " +
		"a newer task holds their idempotency key, or they were requeued or purged meanwhile.",
	"purged":             "Purged %s dead letters for good.",
	"schedule":           "Schedule %s updated; the leader applies it at its next look (within a second).",
	"triggered":          "Schedule %s: one task enqueued now; its ticks did not move.",
	"resubmitted":        "The message is task %s now.",
	"resubmitted-before": "The message was resubmitted before: it is task %s.",
	"rejected-deleted":   "Rejected message %s deleted.",
}

// doneMessage is the message of the done code in q, or "".
func doneMessage(q url.Values) string {
	msg, ok := doneMessages[q.Get("done")]
	if !ok {
		return ""
	}
	if !strings.Contains(msg, "%s") {
		return msg
	}
	arg := q.Get("n")
	if !nameRE.MatchString(arg) {
		return ""
	}
	return fmt.Sprintf(msg, arg)
}

// nameRE is what a queue or type name (or a count) may be.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
