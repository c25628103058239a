package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/internal/mdblock"
)

// TestWorkflowsAPI: a workflow created through the API runs in the order
// of its needs and reads back as a graph; bad documents are 400 and write
// nothing; depends_on holds a task until its dependency succeeded.
func TestWorkflowsAPI(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		before := b.countTasks(t)
		for name, body := range map[string]string{
			"cycle":     `{"name":"w","tasks":[{"name":"a","type":"email.send","needs":["b"]},{"name":"b","type":"email.send","needs":["a"]}]}`,
			"unknown":   `{"name":"w","tasks":[{"name":"a","type":"email.send","needs":["z"]}]}`,
			"duplicate": `{"name":"w","tasks":[{"name":"a","type":"email.send"},{"name":"a","type":"email.send"}]}`,
			"self":      `{"name":"w","tasks":[{"name":"a","type":"email.send","needs":["a"]}]}`,
			"no tasks":  `{"name":"w","tasks":[]}`,
			"policy":    `{"name":"w","on_failure":"skip","tasks":[{"name":"a","type":"email.send"}]}`,
			"field":     `{"name":"w","tasks":[{"name":"a","type":"email.send","depends_on":[1]}]}`,
		} {
			b.call(t, "POST", "/v1/workflows", body).problem(t, http.StatusBadRequest, "")
			_ = name
		}
		b.call(t, "POST", "/v1/tasks", `{"type":"email.send","depends_on":[999999]}`).problem(t, http.StatusBadRequest, "999999")
		if after := b.countTasks(t); after != before {
			t.Fatalf("refused documents wrote tasks: %d before, %d after", before, after)
		}
		var list WorkflowList
		b.call(t, "GET", "/v1/workflows", "").ok(t, http.StatusOK, &list)
		if len(list.Workflows) != 0 {
			t.Fatalf("refused documents stored %+v", list)
		}

		res := b.call(t, "POST", "/v1/workflows", `{"name":"reports","tasks":[`+
			`{"name":"mail","type":"report.build","payload":{"to":"ops"},"needs":["r1","r2"]},`+
			`{"name":"r1","type":"email.send","payload":{"n":1}},{"name":"r2","type":"email.send","payload":{"n":2}}]}`)
		var w WorkflowRecord
		res.ok(t, http.StatusCreated, &w)
		if want := fmt.Sprintf("/v1/workflows/%d", w.ID); res.header.Get("Location") != want {
			t.Fatalf("Location %q, want %q", res.header.Get("Location"), want)
		}
		if w.State != "running" || len(w.Tasks) != 3 || w.OnFailure != "cancel" || w.Tasks[2].Name != "mail" || !w.Tasks[2].Held {
			t.Fatalf("created %+v", w)
		}
		startWorker(t, b, func(ctx context.Context, task *keel.Task[json.RawMessage]) error { return nil })
		deadline := time.Now().Add(30 * time.Second)
		for w.State != "succeeded" {
			if time.Now().After(deadline) {
				t.Fatalf("workflow still %+v after 30s", w)
			}
			time.Sleep(50 * time.Millisecond)
			b.call(t, "GET", fmt.Sprintf("/v1/workflows/%d", w.ID), "").ok(t, http.StatusOK, &w)
		}
		if n := w.Tasks[2]; n.State != "succeeded" || n.Held || fmt.Sprint(n.Needs) != "[r1 r2]" || n.Type != typeReport {
			t.Fatalf("node %+v", n)
		}
		b.call(t, "GET", "/v1/workflows", "").ok(t, http.StatusOK, &list)
		if len(list.Workflows) != 1 || list.Workflows[0].ID != w.ID || list.Workflows[0].Tasks != nil {
			t.Fatalf("list %+v", list)
		}
		b.call(t, "GET", "/v1/workflows/99999", "").problem(t, http.StatusNotFound, "workflow 99999 not found")

		var dep, held Task
		b.call(t, "POST", "/v1/tasks", `{"type":"email.send"}`).ok(t, http.StatusCreated, &dep)
		b.call(t, "POST", "/v1/tasks", fmt.Sprintf(`{"type":"report.build","depends_on":[%d]}`, dep.ID)).ok(t, http.StatusCreated, &held)
		for deadline := time.Now().Add(30 * time.Second); held.State != "succeeded"; {
			if time.Now().After(deadline) {
				t.Fatalf("dependent still %+v", held)
			}
			time.Sleep(50 * time.Millisecond)
			b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", held.ID), "").ok(t, http.StatusOK, &held)
		}
		b.call(t, "GET", fmt.Sprintf("/v1/tasks/%d", dep.ID), "").ok(t, http.StatusOK, &dep)
		if held.StartedAt == nil || dep.FinishedAt == nil || held.StartedAt.Before(*dep.FinishedAt) {
			t.Fatalf("dependent started %v, its dependency finished %v", held.StartedAt, dep.FinishedAt)
		}
	})
}

// countTasks is how many tasks GET /v1/tasks lists.
func (b *bundle) countTasks(t *testing.T) int {
	t.Helper()
	var l TaskList
	b.call(t, "GET", "/v1/tasks?limit=1000", "").ok(t, http.StatusOK, &l)
	return len(l.Tasks)
}

// TestWorkflowsGuideDocument: the workflow document of the workflows
// guide (docs/workflows.md) is accepted by POST /v1/workflows as written.
func TestWorkflowsGuideDocument(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../docs/workflows.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := mdblock.Fenced(string(text), "json")
	if len(blocks) == 0 {
		t.Fatal("no ```json block in docs/workflows.md")
	}
	b := setup(t, "sqlite", Options{}, func(c *keel.Config) { c.Types = append(c.Types, "report.generate", "report.mail") })
	for _, blk := range blocks {
		var w WorkflowRecord
		b.call(t, "POST", "/v1/workflows", blk.Body).ok(t, http.StatusCreated, &w)
		if len(w.Tasks) != 4 || w.Tasks[3].Name != "mail" || !w.Tasks[3].Held || fmt.Sprint(w.Tasks[3].Needs) != "[acme globex initech]" {
			t.Fatalf("docs/workflows.md:%d: created %+v", blk.Line, w)
		}
	}
}
