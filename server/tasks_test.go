package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

func TestEnqueue(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.workerElsewhere(t)
		before := time.Now().Add(-time.Second)
		res := b.call(t, "POST", "/v1/tasks", `{
			"type": "email.send", "payload": {"to": "ada@example.com", "n": [1, 2.50, {"x": null}]},
			"queue": "mail", "priority": 7, "max_attempts": 3, "timeout": "90s", "meta": {"tenant": "t1"}
		}`)
		var task Task
		res.ok(t, http.StatusCreated, &task)
		if loc := res.header.Get("Location"); loc != "/v1/tasks/"+strconv.FormatInt(task.ID, 10) {
			t.Fatalf("Location %q for task %d", loc, task.ID)
		}
		if task.Type != typeEmail || task.Queue != "mail" || task.Priority != 7 || task.MaxAttempts != 3 ||
			time.Duration(task.Timeout) != 90*time.Second || task.State != "pending" || task.Duplicate {
			t.Fatalf("task %+v", task)
		}
		if string(task.Payload) != `{"n":[1,2.50,{"x":null}],"to":"ada@example.com"}` {
			t.Fatalf("payload %s", task.Payload)
		}
		if string(task.Meta) != `{"tenant":"t1"}` {
			t.Fatalf("meta %s", task.Meta)
		}
		if task.CreatedAt.Before(before) || task.RunAt.Before(before) || task.Errors == nil || len(task.Errors) != 0 {
			t.Fatalf("task %+v", task)
		}
		if task.ETA == nil {
			t.Fatal("a new pending task has no eta")
		}

		// Defaults: only the type is required; the payload is {}.
		minimal := b.enqueue(t, `{"type":"report.build"}`)
		if minimal.Queue != keel.DefaultQueue || string(minimal.Payload) != "{}" || minimal.MaxAttempts != 4 {
			t.Fatalf("minimal task %+v", minimal)
		}

		// Scheduled: run_at and delay.
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
		scheduled := b.enqueue(t, fmt.Sprintf(`{"type":"report.build","run_at":%q}`, at.Format(time.RFC3339Nano)))
		// PostgreSQL stores run_at relative to its own clock: allow a skew.
		if d := scheduled.RunAt.Sub(at).Abs(); d > time.Second || scheduled.ETA == nil || !scheduled.ETA.Equal(scheduled.RunAt) {
			t.Fatalf("scheduled task run_at %v eta %v, want %v", scheduled.RunAt, scheduled.ETA, at)
		}
		delayed := b.enqueue(t, `{"type":"report.build","delay":"2h"}`)
		if d := delayed.RunAt.Sub(delayed.CreatedAt); d < 2*time.Hour-time.Second || d > 2*time.Hour+time.Second {
			t.Fatalf("delayed task runs %v after creation", d)
		}
		if b.taskCount(t) != 4 {
			t.Fatalf("%d tasks stored, want 4", b.taskCount(t))
		}
	})
}

func TestEnqueueIdempotency(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		// The header's key.
		first := b.call(t, "POST", "/v1/tasks", `{"type":"email.send","payload":{"a":1,"b":2}}`, "Idempotency-Key", "order-17")
		var task Task
		first.ok(t, http.StatusCreated, &task)
		if task.Duplicate {
			t.Fatal("first enqueue is a duplicate")
		}
		// A replay, with the same payload written differently: 200, the same task.
		for _, body := range []string{
			`{"type":"email.send","payload":{"b":2,"a":1}}`,
			`{"type":"email.send","payload":{"b":2,"a":1},"idempotency_key":"order-17"}`,
		} {
			var dup Task
			res := b.call(t, "POST", "/v1/tasks", body, "Idempotency-Key", "order-17")
			res.ok(t, http.StatusOK, &dup)
			if !dup.Duplicate || dup.ID != task.ID || res.header.Get("Location") != "" {
				t.Fatalf("replay: %+v, want duplicate of task %d", dup, task.ID)
			}
		}
		// The body's key alone is the same key.
		var dup Task
		b.call(t, "POST", "/v1/tasks", `{"type":"email.send","payload":{"a":1,"b":2},"idempotency_key":"order-17"}`).ok(t, http.StatusOK, &dup)
		if !dup.Duplicate || dup.ID != task.ID {
			t.Fatalf("body key replay: %+v", dup)
		}
		// unique_by dedupes by content.
		u1 := b.enqueue(t, `{"type":"report.build","payload":{"day":"2026-01-02"},"unique_by":"daily"}`)
		var u2 Task
		b.call(t, "POST", "/v1/tasks", `{"type":"report.build","payload":{"day":"2026-01-02"},"unique_by":"daily"}`).ok(t, http.StatusOK, &u2)
		if !u2.Duplicate || u2.ID != u1.ID {
			t.Fatalf("unique_by replay: %+v", u2)
		}
		if n := b.taskCount(t); n != 2 {
			t.Fatalf("%d tasks stored, want 2", n)
		}
	})
}

func TestBatch(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		var resp BatchResponse
		b.call(t, "POST", "/v1/tasks/batch", `{"tasks":[
			{"type":"email.send","payload":{"to":"a"}},
			{"type":"report.build","queue":"reports","priority":-3},
			{"type":"email.send","payload":{"to":"b"},"idempotency_key":"k-1"}
		]}`).ok(t, http.StatusCreated, &resp)
		if len(resp.Tasks) != 3 {
			t.Fatalf("%d tasks answered, want 3", len(resp.Tasks))
		}
		if resp.Tasks[0].Type != typeEmail || string(resp.Tasks[0].Payload) != `{"to":"a"}` ||
			resp.Tasks[1].Queue != "reports" || resp.Tasks[1].Priority != -3 || resp.Tasks[2].Duplicate {
			t.Fatalf("batch answer in the wrong order or shape: %+v", resp.Tasks)
		}
		// Each pending task carries its estimate: here no worker serves
		// their queues.
		for i, task := range resp.Tasks {
			if task.State != "pending" || task.ETAStatus != string(keel.ETANoWorker) || task.ETA != nil {
				t.Fatalf("task #%d: %s, eta_status %q, eta %v", i, task.State, task.ETAStatus, task.ETA)
			}
		}
		// An item's key replays like a single enqueue.
		var again BatchResponse
		b.call(t, "POST", "/v1/tasks/batch", `{"tasks":[{"type":"email.send","payload":{"to":"b"},"idempotency_key":"k-1"}]}`).ok(t, http.StatusCreated, &again)
		if !again.Tasks[0].Duplicate || again.Tasks[0].ID != resp.Tasks[2].ID {
			t.Fatalf("batch replay %+v", again.Tasks[0])
		}
		if n := b.taskCount(t); n != 3 {
			t.Fatalf("%d tasks stored, want 3", n)
		}
	})
}

func TestGetTask(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.workerElsewhere(t)
		created := b.enqueue(t, `{"type":"email.send","payload":{"to":"x"}}`)
		var got Task
		b.call(t, "GET", "/v1/tasks/"+strconv.FormatInt(created.ID, 10), "").ok(t, http.StatusOK, &got)
		if got.ID != created.ID || got.State != "pending" || string(got.Payload) != `{"to":"x"}` {
			t.Fatalf("got %+v", got)
		}
		// Alone in its queue, a ready task's estimated start is now.
		if got.ETA == nil || time.Since(*got.ETA) > time.Minute || time.Until(*got.ETA) > time.Minute {
			t.Fatalf("eta %v for a ready task alone in its queue", got.ETA)
		}
		// HEAD works like GET without a body.
		if res := b.call(t, "HEAD", "/v1/tasks/"+strconv.FormatInt(created.ID, 10), ""); res.status != http.StatusOK || len(res.body) != 0 {
			t.Fatalf("HEAD: %d %q", res.status, res.body)
		}
		// No eta once it is not pending.
		b.call(t, "POST", fmt.Sprintf("/v1/tasks/%d/cancel", created.ID), "").ok(t, http.StatusOK, nil)
		b.call(t, "GET", "/v1/tasks/"+strconv.FormatInt(created.ID, 10), "").ok(t, http.StatusOK, &got)
		if got.State != "cancelled" || got.ETA != nil || got.FinishedAt == nil {
			t.Fatalf("cancelled task %+v", got)
		}
	})
}

func TestETABehindBacklog(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.workerElsewhere(t)
		// A task behind others in a queue where nothing finished recently
		// has no estimate; the first in line starts now.
		first := b.enqueue(t, `{"type":"email.send","priority":5}`)
		b.enqueue(t, `{"type":"email.send"}`)
		last := b.enqueue(t, `{"type":"email.send"}`)
		if first.ETA == nil {
			t.Fatal("first in line has no eta")
		}
		var got Task
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", last.ID), "").ok(t, http.StatusOK, &got)
		if got.ETA != nil {
			t.Fatalf("eta %v behind a backlog with no throughput", got.ETA)
		}
		// Nobody works queue "idle": no estimate even for the first in line.
		if idle := b.enqueue(t, `{"type":"email.send","queue":"idle"}`); idle.ETA != nil {
			t.Fatalf("eta %v in a queue no worker serves", idle.ETA)
		}
	})
}

func TestCancelAndRetry(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		b.workerElsewhere(t)
		task := b.enqueue(t, `{"type":"email.send"}`)
		var cancelled, retried Task
		b.call(t, "POST", fmt.Sprintf("/v1/tasks/%d/cancel", task.ID), "").ok(t, http.StatusOK, &cancelled)
		if cancelled.State != "cancelled" || cancelled.ID != task.ID {
			t.Fatalf("cancel answered %+v", cancelled)
		}
		b.call(t, "POST", fmt.Sprintf("/v1/tasks/%d/retry", task.ID), "").ok(t, http.StatusOK, &retried)
		if retried.State != "pending" || retried.Attempt != 0 || retried.ETA == nil {
			t.Fatalf("retry answered %+v", retried)
		}
	})
}

func TestListTasks(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		mark := time.Now().Add(-time.Second)
		var all []int64
		for i := range 12 {
			typ := typeEmail
			if i%3 == 0 {
				typ = typeReport
			}
			all = append(all, b.enqueue(t, fmt.Sprintf(`{"type":%q,"queue":"q%d"}`, typ, i%2)).ID)
		}
		b.call(t, "POST", fmt.Sprintf("/v1/tasks/%d/cancel", all[0]), "").ok(t, http.StatusOK, nil)
		list := func(query string) []int64 {
			t.Helper()
			var l TaskList
			b.call(t, "GET", "/v1/tasks"+query, "").ok(t, http.StatusOK, &l)
			ids := make([]int64, len(l.Tasks))
			for i, task := range l.Tasks {
				ids[i] = task.ID
			}
			return ids
		}
		newestFirst := slices.Clone(all)
		slices.Reverse(newestFirst)
		if got := list(""); !slices.Equal(got, newestFirst) {
			t.Fatalf("list %v, want %v", got, newestFirst)
		}
		if got := list("?type=report.build"); len(got) != 4 {
			t.Fatalf("type filter: %v", got)
		}
		if got := list("?queue=q1&type=email.send"); len(got) != 4 {
			t.Fatalf("queue and type filter: %v", got)
		}
		if got := list("?state=cancelled"); !slices.Equal(got, all[:1]) {
			t.Fatalf("state filter: %v", got)
		}
		after := mark.UTC().Format(time.RFC3339Nano)
		if got := list("?created_after=" + after + "&created_before=" + time.Now().Add(time.Minute).UTC().Format(time.RFC3339)); len(got) != 12 {
			t.Fatalf("created range: %v", got)
		}
		if got := list("?created_before=" + mark.UTC().Format(time.RFC3339Nano)); len(got) != 0 {
			t.Fatalf("created_before in the past: %v", got)
		}
		// Only the cancelled task has finished: the pending ones match no
		// finished bound.
		soon := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
		if got := list("?finished_after=" + after); !slices.Equal(got, all[:1]) {
			t.Fatalf("finished_after: %v, want %v", got, all[:1])
		}
		if got := list("?finished_after=" + after + "&finished_before=" + soon + "&created_after=" + after); !slices.Equal(got, all[:1]) {
			t.Fatalf("finished range: %v, want %v", got, all[:1])
		}
		if got := list("?finished_before=" + soon); !slices.Equal(got, all[:1]) {
			t.Fatalf("finished_before: %v, want %v", got, all[:1])
		}
		if got := list("?finished_before=" + after); len(got) != 0 {
			t.Fatalf("finished_before in the past: %v", got)
		}
		if got := list("?state=pending&finished_after=" + after); len(got) != 0 {
			t.Fatalf("pending tasks with a finished bound: %v", got)
		}
		if got := list("?limit=5"); !slices.Equal(got, newestFirst[:5]) {
			t.Fatalf("limit 5: %v", got)
		}
		// Nothing matches: an empty array, not null.
		res := b.call(t, "GET", "/v1/tasks?type=nothing.here", "")
		if !strings.Contains(string(res.body), `"tasks":[]`) {
			t.Fatalf("empty list: %s", res.body)
		}
	})
}

// TestListTasksByNames: type takes a list and prefixes, exclude_type and
// exclude_queue leave tasks out, alike on every database, and a bad name
// in a list is a 400 that names it.
func TestListTasksByNames(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		var email, report []int64
		for i := range 6 {
			typ := typeEmail
			if i%3 == 0 {
				typ = typeReport
			}
			id := b.enqueue(t, fmt.Sprintf(`{"type":%q,"queue":"q%d"}`, typ, i%2)).ID
			if typ == typeEmail {
				email = append([]int64{id}, email...)
			} else {
				report = append([]int64{id}, report...)
			}
		}
		list := func(query string) []int64 {
			t.Helper()
			var l TaskList
			b.call(t, "GET", "/v1/tasks"+query, "").ok(t, http.StatusOK, &l)
			ids := []int64{}
			for _, task := range l.Tasks {
				ids = append(ids, task.ID)
			}
			return ids
		}
		all := list("")
		for _, tc := range []struct {
			query string
			want  []int64
		}{
			{"?type=" + typeEmail + "," + typeReport, all},
			{"?type=" + typeEmail + ",%20nothing.here", email},
			{"?type=report.*", report},
			{"?exclude_type=report.*", email},
			{"?exclude_type=" + typeEmail + "," + typeReport, []int64{}},
			{"?exclude_type=keel.*&exclude_queue=keel", all},
			{"?exclude_queue=q0,q1", []int64{}},
			{"?type=email.*&exclude_queue=q0", []int64{email[0], email[3]}}, // queue q1: the 2nd and 6th task
		} {
			if got := list(tc.query); !slices.Equal(got, tc.want) {
				t.Errorf("%s: %v, want %v", tc.query, got, tc.want)
			}
		}
		for _, tc := range []struct{ query, want string }{
			{"?type=" + typeEmail + ",bad%20name", `invalid type \"bad name\"`},
			{"?type=*", `invalid type \"*\"`},
			{"?exclude_type=keel.**", `invalid excluded type \"keel.**\"`},
			{"?exclude_queue=q0,-q1", `invalid excluded queue \"-q1\"`},
			{"?exclude_type=" + strings.Repeat("a,", 51), "at most 50 excluded types"},
		} {
			res := b.call(t, "GET", "/v1/tasks"+tc.query, "")
			if res.status != http.StatusBadRequest || !strings.Contains(string(res.body), tc.want) {
				t.Errorf("%s: %d %s, want 400 saying %s", tc.query, res.status, res.body, tc.want)
			}
		}
	})
}

// walk follows next_cursor from path and returns every id it saw and how
// many pages it took.
func walk(t *testing.T, b *bundle, path string) ([]int64, int) {
	t.Helper()
	var ids []int64
	pages := 0
	cursor := ""
	for {
		p := path
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		var l TaskList
		b.call(t, "GET", p, "").ok(t, http.StatusOK, &l)
		pages++
		for _, task := range l.Tasks {
			ids = append(ids, task.ID)
		}
		if l.NextCursor == "" {
			return ids, pages
		}
		if len(l.Tasks) == 0 {
			t.Fatalf("page %d is empty but has a next cursor", pages)
		}
		cursor = l.NextCursor
		if pages > 2000 {
			t.Fatal("pagination does not end")
		}
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		var items []string
		for i := range 1001 {
			typ := typeEmail
			if i%4 == 0 {
				typ = typeReport
			}
			items = append(items, fmt.Sprintf(`{"type":%q,"payload":%d}`, typ, i))
		}
		b.call(t, "POST", "/v1/tasks/batch", `{"tasks":[`+strings.Join(items[:1000], ",")+`]}`).ok(t, http.StatusCreated, nil)
		b.enqueue(t, items[1000])
		for _, c := range []struct {
			path  string
			total int
			pages int
		}{
			{"/v1/tasks?limit=7", 1001, 143},
			{"/v1/tasks?limit=1000", 1001, 2},
			{"/v1/tasks?limit=143", 1001, 7}, // the last page is full: no empty page after it
			{"/v1/tasks?type=report.build&limit=50", 251, 6},
			{"/v1/tasks?state=pending&type=report.build&limit=1", 251, 251},
		} {
			ids, pages := walk(t, b, c.path)
			if len(ids) != c.total || pages != c.pages {
				t.Fatalf("%s: %d tasks in %d pages, want %d in %d", c.path, len(ids), pages, c.total, c.pages)
			}
			if !slices.IsSortedFunc(ids, func(a, b int64) int { return int(b - a) }) {
				t.Fatalf("%s: not newest first", c.path)
			}
			if len(slices.Compact(slices.Clone(ids))) != len(ids) {
				t.Fatalf("%s: duplicates across pages", c.path)
			}
		}
	})
}

func TestWorkerProcessesAPITask(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		type report struct {
			Day string `json:"day"`
		}
		h := keel.NewHandlers()
		keel.Handle(h, typeReport, func(ctx context.Context, task *keel.Task[report]) error {
			return task.SetResult(map[string]string{"built": task.Args.Day})
		})
		worker, err := keel.NewClient(keel.Config{Driver: b.drv, Handlers: h, Logger: b.log, PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := worker.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			worker.Stop(ctx) //nolint:errcheck // always nil
		})
		task := b.enqueue(t, `{"type":"report.build","payload":{"day":"2026-03-01"}}`)
		deadline := time.Now().Add(20 * time.Second)
		for {
			var got Task
			b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", task.ID), "").ok(t, http.StatusOK, &got)
			if got.State == "succeeded" {
				var result map[string]string
				if err := json.Unmarshal(got.Result, &result); err != nil || result["built"] != "2026-03-01" {
					t.Fatalf("result %s (%v)", got.Result, err)
				}
				if got.FinishedAt == nil || got.StartedAt == nil || got.Attempt != 1 || got.ETA != nil {
					t.Fatalf("succeeded task %+v", got)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("task still %s after 20s", got.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestGetArchivedTask: an archived task is still found by id, marked
// archived; cancel and retry answer 409 and lists leave it out.
func TestGetArchivedTask(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		created := b.enqueue(t, `{"type":"email.send","payload":{"to":"x"}}`)
		path := "/v1/tasks/" + strconv.FormatInt(created.ID, 10)
		b.call(t, "POST", path+"/cancel", "").ok(t, http.StatusOK, nil)
		now := time.Now()
		res, err := b.drv.Archive(t.Context(), driver.ArchiveParams{SucceededBefore: now.Add(time.Hour), Limit: 10, Now: now})
		if err != nil || res.Cancelled != 1 {
			t.Fatalf("archive: %+v, %v", res, err)
		}
		var got Task
		b.call(t, "GET", path, "").ok(t, http.StatusOK, &got)
		if got.ID != created.ID || got.State != "cancelled" || !got.Archived || got.ArchivedAt == nil || got.FinishedAt == nil {
			t.Fatalf("archived task %+v", got)
		}
		if time.Since(*got.ArchivedAt) > time.Minute || time.Until(*got.ArchivedAt) > time.Minute {
			t.Fatalf("archived_at %v, want about now", got.ArchivedAt)
		}
		for _, op := range []string{"/cancel", "/retry"} {
			if r := b.call(t, "POST", path+op, ""); r.status != http.StatusConflict {
				t.Fatalf("POST %s of an archived task: %d %s, want 409", op, r.status, r.body)
			}
		}
		var list struct {
			Tasks []Task `json:"tasks"`
		}
		b.call(t, "GET", "/v1/tasks", "").ok(t, http.StatusOK, &list)
		if len(list.Tasks) != 0 {
			t.Fatalf("list has %d tasks, want none: the archived task is not listed", len(list.Tasks))
		}
		// A live task carries neither field.
		live := b.enqueue(t, `{"type":"email.send","payload":{"to":"y"}}`)
		r := b.call(t, "GET", "/v1/tasks/"+strconv.FormatInt(live.ID, 10), "")
		if r.status != http.StatusOK || strings.Contains(string(r.body), `"archived`) {
			t.Fatalf("live task: %d %s", r.status, r.body)
		}
	})
}
