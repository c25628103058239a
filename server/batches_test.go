package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/batch"
)

// createBatch posts body to POST /v1/batches and returns the answer.
func (b *bundle) createBatch(t *testing.T, body string) BatchTasks {
	t.Helper()
	var bt BatchTasks
	res := b.call(t, "POST", "/v1/batches", body)
	res.ok(t, http.StatusCreated, &bt)
	if want := fmt.Sprintf("/v1/batches/%d", bt.Batch.ID); res.header.Get("Location") != want {
		t.Fatalf("Location %q, want %q", res.header.Get("Location"), want)
	}
	return bt
}

// batch returns GET /v1/batches/{id}.
func (b *bundle) batch(t *testing.T, id int64) BatchRecord {
	t.Helper()
	var rec BatchRecord
	b.call(t, "GET", fmt.Sprintf("/v1/batches/%d", id), "").ok(t, http.StatusOK, &rec)
	return rec
}

// batchCount is how many batches GET /v1/batches lists.
func (b *bundle) batchCount(t *testing.T) int {
	t.Helper()
	var l BatchList
	b.call(t, "GET", "/v1/batches?limit=1000", "").ok(t, http.StatusOK, &l)
	return len(l.Batches)
}

// TestBatchesAPI: a batch created through the API runs on a worker,
// finishes with both callbacks enqueued once, and its members page by id.
func TestBatchesAPI(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		startWorker(t, b, func(ctx context.Context, task *keel.Task[json.RawMessage]) error { return nil })
		bt := b.createBatch(t, `{"tasks":[{"type":"email.send","payload":{"n":1}},{"type":"email.send","payload":{"n":2}},`+
			`{"type":"email.send","payload":{"n":3}}],"on_success":{"type":"report.build","payload":{"why":"ok"}},`+
			`"on_finish":{"type":"report.build","payload":{"why":"done"}}}`)
		if bt.Batch.State != "running" || bt.Batch.Total != 3 || len(bt.Tasks) != 3 || bt.Batch.SealedAt == nil {
			t.Fatalf("created %+v", bt)
		}
		for i, task := range bt.Tasks {
			if task.Type != typeEmail || string(task.Payload) != fmt.Sprintf(`{"n":%d}`, i+1) || task.BatchID != bt.Batch.ID {
				t.Fatalf("task %d: %+v", i, task)
			}
		}
		id := bt.Batch.ID
		var rec BatchRecord
		deadline := time.Now().Add(30 * time.Second)
		for rec = b.batch(t, id); rec.State != "finished"; rec = b.batch(t, id) {
			if time.Now().After(deadline) {
				t.Fatalf("batch still %+v after 30s", rec)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if rec.Total != 3 || rec.Succeeded != 3 || rec.Pending+rec.Running+rec.Dead+rec.Cancelled != 0 || rec.Progress != 1 ||
			rec.FinishedAt == nil || rec.OnSuccessID == 0 || rec.OnFinishID == 0 || rec.ETA != nil {
			t.Fatalf("finished batch %+v", rec)
		}
		for id, why := range map[int64]string{rec.OnSuccessID: "ok", rec.OnFinishID: "done"} {
			var cb Task
			b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), "").ok(t, http.StatusOK, &cb)
			var ev batch.Event
			if err := json.Unmarshal(cb.Payload, &ev); err != nil || cb.Type != typeReport || ev.BatchID != rec.ID || cb.BatchID != 0 ||
				ev.Succeeded != 3 || !strings.Contains(string(ev.Data), why) {
				t.Fatalf("callback %+v, event %+v (%v)", cb, ev, err)
			}
		}

		var page BatchMembers
		b.call(t, "GET", fmt.Sprintf("/v1/batches/%d/tasks?limit=2", id), "").ok(t, http.StatusOK, &page)
		if len(page.Tasks) != 2 || page.Tasks[0].ID != bt.Tasks[0].ID || page.Tasks[1].ID != bt.Tasks[1].ID || page.Tasks[0].State != "succeeded" ||
			page.Tasks[0].BatchID != id {
			t.Fatalf("first page %+v", page)
		}
		b.call(t, "GET", fmt.Sprintf("/v1/batches/%d/tasks?after_id=%d", id, page.Tasks[1].ID), "").ok(t, http.StatusOK, &page)
		if len(page.Tasks) != 1 || page.Tasks[0].ID != bt.Tasks[2].ID {
			t.Fatalf("second page %+v", page)
		}

		var l BatchList
		b.call(t, "GET", "/v1/batches", "").ok(t, http.StatusOK, &l)
		if len(l.Batches) != 1 || l.Batches[0].ID != id || l.Batches[0].State != "finished" || l.Batches[0].Succeeded != 3 {
			t.Fatalf("list %+v", l)
		}
		b.call(t, "GET", "/v1/batches?unfinished=true", "").ok(t, http.StatusOK, &l)
		if len(l.Batches) != 0 {
			t.Fatalf("unfinished list %+v", l)
		}
	})
}

// TestBatchesOpen: an open batch takes more tasks until sealed; a sealed
// one refuses them (409) and a missing one is a 404, both writing nothing.
func TestBatchesOpen(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		bt := b.createBatch(t, `{"tasks":[{"type":"email.send"}],"on_finish":{"type":"report.build"},"open":true}`)
		if bt.Batch.State != "open" || bt.Batch.SealedAt != nil || bt.Batch.Total != 1 {
			t.Fatalf("created %+v", bt.Batch)
		}
		id := bt.Batch.ID
		var added BatchTasks
		b.call(t, "POST", fmt.Sprintf("/v1/batches/%d/tasks", id), `{"tasks":[{"type":"email.send"},{"type":"report.build"}]}`).
			ok(t, http.StatusOK, &added)
		if added.Batch.ID != id || added.Batch.State != "open" || added.Batch.Total != 3 || added.Batch.Pending != 3 || len(added.Tasks) != 2 ||
			added.Tasks[1].Type != typeReport {
			t.Fatalf("added %+v", added)
		}
		var l BatchList
		b.call(t, "GET", "/v1/batches?unfinished=true&limit=5", "").ok(t, http.StatusOK, &l)
		if len(l.Batches) != 1 || l.Batches[0].ID != id || l.Batches[0].State != "open" {
			t.Fatalf("unfinished list %+v", l)
		}

		var sealed BatchRecord
		b.call(t, "POST", fmt.Sprintf("/v1/batches/%d/seal", id), "").ok(t, http.StatusOK, &sealed)
		if sealed.State != "running" || sealed.SealedAt == nil || sealed.Total != 3 {
			t.Fatalf("sealed %+v", sealed)
		}
		b.call(t, "POST", fmt.Sprintf("/v1/batches/%d/seal", id), "").ok(t, http.StatusOK, &sealed) // again: nothing changes

		before := b.state(t)
		b.call(t, "POST", fmt.Sprintf("/v1/batches/%d/tasks", id), `{"tasks":[{"type":"email.send"}]}`).
			problem(t, http.StatusConflict, fmt.Sprintf("batch %d is sealed", id))
		b.call(t, "POST", "/v1/batches/999/tasks", `{"tasks":[{"type":"email.send"}]}`).problem(t, http.StatusNotFound, "batch 999 not found")
		b.call(t, "POST", "/v1/batches/999/seal", "").problem(t, http.StatusNotFound, "batch 999 not found")
		b.call(t, "GET", "/v1/batches/999", "").problem(t, http.StatusNotFound, "batch 999 not found")
		b.call(t, "GET", "/v1/batches/999/tasks", "").problem(t, http.StatusNotFound, "batch 999 not found")
		b.unchanged(t, before)
		if got := b.batch(t, id); got.Total != 3 {
			t.Fatalf("after refused add: %+v", got)
		}

		// Open again: an add that seals, and a seal-only add.
		second := b.createBatch(t, `{"tasks":[{"type":"email.send"}],"open":true}`)
		b.call(t, "POST", fmt.Sprintf("/v1/batches/%d/tasks", second.Batch.ID), `{"tasks":[],"seal":true}`).ok(t, http.StatusOK, &added)
		if added.Batch.State != "running" || added.Batch.Total != 1 || len(added.Tasks) != 0 {
			t.Fatalf("seal-only add %+v", added)
		}
	})
}

// TestBatchesBadInput: bad bodies, ids and query parameters are 400s (an
// oversized callback payload 413) with the wording of the other routes,
// and write nothing.
func TestBatchesBadInput(t *testing.T) {
	t.Parallel()
	forAllDBs(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{MaxBatch: 2})
		open := b.createBatch(t, `{"tasks":[{"type":"email.send"}],"open":true}`).Batch.ID
		before := b.state(t)
		big := `{"blob":"` + strings.Repeat("x", testPayloadLimit) + `"}`
		for _, c := range []struct {
			method, path, body string
			status             int
			want               string
		}{
			{"POST", "/v1/batches", `{"tasks":[]}`, 400, `field "tasks" must hold at least one task`},
			{"POST", "/v1/batches", `{"open":true}`, 400, `field "tasks" must hold at least one task`},
			{"POST", "/v1/batches", `{"tasks":[{"type":"email.send"},{"type":"email.send"},{"type":"email.send"}]}`, 400, "the limit is 2"},
			{"POST", "/v1/batches", `{"tasks":[{"type":"email.send"}],"extra":1}`, 400, "extra"},
			{"POST", "/v1/batches", `{"tasks":[{"type":"email.send"},{"type":"nope.nope"}]}`, 400, `unknown task type "nope.nope"`},
			{"POST", "/v1/batches", `{"tasks":[{"type":"email.send"}],"on_success":{"type":"nope.nope"}}`, 400, `unknown task type "nope.nope"`},
			{"POST", "/v1/batches", `{"tasks":[{"type":"email.send"}],"on_finish":{"type":"email.send","queue":""}}`, 400, "on_finish.queue"},
			{"POST", "/v1/batches", `{"tasks":[{"type":"email.send"}],"on_finish":{"type":"email.send","payload":` + big + `}}`, 413, "payload"},
			{"POST", "/v1/batches", `{"tasks":[{"type":"email.send","priority":"high"}]}`, 400, `tasks[0].priority`},
			{"POST", fmt.Sprintf("/v1/batches/%d/tasks", open), `{"tasks":[]}`, 400, `field "tasks" must hold at least one task`},
			{"POST", fmt.Sprintf("/v1/batches/%d/tasks", open), `{"tasks":[{"type":"nope.nope"}],"seal":true}`, 400, `unknown task type "nope.nope"`},
			{"POST", fmt.Sprintf("/v1/batches/%d/tasks", open), `{"seal":"yes"}`, 400, "seal"},
			{"POST", "/v1/batches/abc/tasks", `{"tasks":[{"type":"email.send"}]}`, 400, `invalid batch id "abc"`},
			{"POST", "/v1/batches/0/seal", "", 400, `invalid batch id "0"`},
			{"GET", "/v1/batches/-3", "", 400, `invalid batch id "-3"`},
			{"GET", "/v1/batches/1?x=1", "", 400, `unknown query parameter "x"`},
			{"GET", "/v1/batches/1/tasks?limit=0", "", 400, `"limit" must be an integer in 1..1000`},
			{"GET", "/v1/batches/1/tasks?limit=1001", "", 400, `"limit" must be an integer in 1..1000`},
			{"GET", "/v1/batches/1/tasks?after_id=abc", "", 400, `"after_id" must be a positive integer`},
			{"GET", "/v1/batches?unfinished=yes", "", 400, `"unfinished" must be true or false`},
			{"GET", "/v1/batches?before_id=-1", "", 400, `"before_id" must be a positive integer`},
			{"GET", "/v1/batches?limit=x", "", 400, `"limit" must be an integer`},
		} {
			t.Run(c.method+" "+c.path+" "+c.body[:min(len(c.body), 40)], func(t *testing.T) {
				b.call(t, c.method, c.path, c.body).problem(t, c.status, c.want)
			})
		}
		b.call(t, "POST", "/v1/batches", `{"tasks":[{"type":"email.send"}]}`, "Idempotency-Key", "k1").
			problem(t, http.StatusBadRequest, "Idempotency-Key header applies to POST /v1/tasks")
		b.call(t, "POST", "/v1/batches", `{"tasks":[{"type":"email.send"}]}`, "Content-Type", "text/plain").
			problem(t, http.StatusUnsupportedMediaType, "application/json")
		b.unchanged(t, before)
		if n := b.batchCount(t); n != 1 {
			t.Fatalf("%d batches after refused requests, want 1", n)
		}
		if got := b.batch(t, open); got.Total != 1 || got.State != "open" {
			t.Fatalf("open batch after refused adds: %+v", got)
		}
	})
}
