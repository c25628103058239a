package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/keelq/keel"
)

// TestOverviewLatency: the overview shows pickup and run time and the
// attempts used, with the sample size; the chart data has the error rate.
func TestOverviewLatency(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		seed(t, b, 3)
		for _, p := range []string{"/", "/live"} {
			r := b.do(t, "GET", p, readToken, nil)
			checkPage(t, p, r)
			for _, want := range []string{`id="latency-all"`, `id="latency-default"`, `id="attempts-dead"`, "Over the newest 3 finished tasks"} {
				if !strings.Contains(r.body, want) {
					t.Errorf("%s: no %q in %s", p, want, r.body)
				}
			}
			if strings.Contains(r.body, `id="attempts-succeeded"`) {
				t.Errorf("%s: an attempts row for succeeded tasks, none succeeded", p)
			}
		}
		r := b.do(t, "GET", "/history.json?range=hour", readToken, nil)
		var c struct {
			At        []int64    `json:"at"`
			ErrorRate []*float64 `json:"error_rate"`
		}
		if err := json.Unmarshal([]byte(r.body), &c); err != nil || len(c.ErrorRate) != len(c.At) {
			t.Fatalf("history.json: %v: %s", err, r.body)
		}
		var rated bool
		for _, e := range c.ErrorRate {
			if e != nil {
				rated = true
				if *e != 100 {
					t.Errorf("error rate %v, want 100 (every attempt failed)", *e)
				}
			}
		}
		if !rated {
			t.Errorf("no error rate in %s", r.body)
		}
	})
}

// TestFindByKey: the tasks page opens the task holding a key, and says in
// words when none does.
func TestFindByKey(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		ti, err := b.client.Enqueue(t.Context(), typeReport, map[string]int{"n": 1}, keel.IdempotencyKey("order <7>"))
		if err != nil {
			t.Fatal(err)
		}
		r := b.do(t, "GET", "/tasks?key="+url.QueryEscape("order <7>"), "", nil)
		if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || loc != fmt.Sprintf("/tasks/%d", ti.ID) {
			t.Errorf("find by key: %d to %q", r.status, loc)
		}
		r = b.do(t, "GET", "/tasks?key="+url.QueryEscape("<script>alert(1)</script>"), "", nil)
		if r.status != http.StatusNotFound || !strings.Contains(r.body, "No task holds that key") || !strings.Contains(r.body, "UniqueBy") {
			t.Errorf("unknown key: %d %s", r.status, r.body)
		}
		checkPage(t, "unknown key", r)
		r = b.do(t, "GET", "/tasks?key="+strings.Repeat("k", 300), "", nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("long key: %d", r.status)
		}
		if r := b.do(t, "GET", "/tasks", "", nil); !strings.Contains(r.body, `id="find-key"`) {
			t.Errorf("tasks page has no find-by-key box")
		}
	})
}

// TestDeadSelectedByID: any selection of dead letters is requeued or
// purged by id, whatever their finish times (no lowest-id-first rule);
// tasks not selected stay.
func TestDeadSelectedByID(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		s := seed(t, b, 4)
		state := func(id int64) keel.State {
			ti, err := b.client.Get(t.Context(), id)
			if err != nil {
				return "gone"
			}
			return ti.State
		}
		post := func(form url.Values, status int) response {
			t.Helper()
			r := b.do(t, "POST", "/dead/selected", "", form)
			if r.status != status {
				t.Fatalf("POST %v: %d, want %d: %s", form, r.status, status, r.body)
			}
			return r
		}
		r := post(url.Values{"action": {"purge"}, "force": {"yes"}, "id": {fmt.Sprint(s.dead[3]), fmt.Sprint(s.dead[1]), fmt.Sprint(s.dead[3])}}, http.StatusSeeOther)
		if loc := r.header.Get("Location"); loc != "/dead?done=purged&n=2" {
			t.Errorf("purge: Location %q", loc)
		}
		r = post(url.Values{"action": {"requeue"}, "id": {fmt.Sprint(s.dead[2])}}, http.StatusSeeOther)
		if loc := r.header.Get("Location"); loc != "/dead?done=requeued&n=1" {
			t.Errorf("requeue: Location %q", loc)
		}
		want := map[int64]keel.State{s.dead[0]: keel.StateDead, s.dead[1]: "gone", s.dead[2]: keel.StatePending, s.dead[3]: "gone", s.pending: keel.StatePending}
		for id, st := range want {
			if got := state(id); got != st {
				t.Errorf("task %d is %s, want %s", id, got, st)
			}
		}
		// A selection with a task that is not a dead letter changes nothing.
		post(url.Values{"action": {"purge"}, "force": {"yes"}, "id": {fmt.Sprint(s.dead[0]), fmt.Sprint(s.pending)}}, http.StatusConflict)
		if got := state(s.dead[0]); got != keel.StateDead {
			t.Errorf("after a refused selection task %d is %s", s.dead[0], got)
		}
	})
}
