package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
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

// TestBacklogChart: the backlog chart draws nothing before the history's
// first minute, and a burst of 220 tasks that mostly left within its
// minute shows its peak beside the estimated 45 left at the minute's end.
func TestBacklogChart(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		ctx := t.Context()
		specs := make([]keel.TaskSpec, 220)
		for i := range specs {
			specs[i] = keel.TaskSpec{Type: typeReport, Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		}
		infos, err := b.client.EnqueueMany(ctx, specs)
		if err != nil {
			t.Fatal(err)
		}
		// What the leader's sampler stores at the burst's height.
		store, ok := b.drv.(driver.BacklogStore)
		if !ok {
			t.Fatalf("driver %T keeps no backlog", b.drv)
		}
		peakMinute := driver.DueMinute(time.Now())
		if err := store.RecordBacklog(ctx, driver.BacklogSample{Minute: peakMinute, Pending: 220}); err != nil {
			t.Fatal(err)
		}
		for _, ti := range infos[:175] {
			if _, err := b.client.Cancel(ctx, ti.ID); err != nil {
				t.Fatal(err)
			}
		}
		first, ok, err := store.FirstMinute(ctx)
		if err != nil || !ok {
			t.Fatalf("first minute: %v %v", ok, err)
		}
		r := b.do(t, "GET", "/history.json?range=hour", readToken, nil)
		var c struct {
			At          []int64  `json:"at"`
			Backlog     []*int64 `json:"backlog"`
			BacklogPeak []*int64 `json:"backlog_peak"`
		}
		if err := json.Unmarshal([]byte(r.body), &c); err != nil || len(c.Backlog) != len(c.At) || len(c.BacklogPeak) != len(c.At) {
			t.Fatalf("history.json: %v: %s", err, r.body)
		}
		if c.At[0] >= first*60 {
			t.Fatalf("the hour starts at %d, after the first minute %d: nothing to check", c.At[0], first*60)
		}
		var peakShown bool
		for i, at := range c.At {
			before := at < first*60
			if before && (c.Backlog[i] != nil || c.BacklogPeak[i] != nil) {
				t.Errorf("step %d, before the first minute %d: backlog %v, peak %v; want neither", at, first*60, c.Backlog[i], c.BacklogPeak[i])
			}
			if !before && c.Backlog[i] == nil {
				t.Errorf("step %d: no backlog", at)
			}
			if at == peakMinute*60 {
				if c.BacklogPeak[i] == nil || *c.BacklogPeak[i] != 220 {
					t.Errorf("the burst's step %d: peak %v, want 220", at, c.BacklogPeak[i])
				}
				peakShown = true
			}
			if at == first*60 && c.Backlog[i] != nil && *c.Backlog[i] > 220 {
				t.Errorf("the first step's backlog %d: more than was ever enqueued", *c.Backlog[i])
			}
		}
		if !peakShown {
			t.Errorf("no step at the burst's minute %d in %v", peakMinute*60, c.At)
		}
		if last := c.Backlog[len(c.Backlog)-1]; last == nil || *last != 45 {
			t.Errorf("backlog now %v, want 45", last)
		}
	})
}
