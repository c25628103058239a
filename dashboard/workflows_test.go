package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/workflow"
)

// TestWorkflowPages: the workflow list links each workflow; a workflow's
// page draws its graph (a box per task linking to its page, an arrow per
// need) with each task's state, a held task as waiting, and the reason a
// cancelled one carries is on its task page; names are escaped.
func TestWorkflowPages(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{Tokens: testTokens})
		ctx := t.Context()
		spec := func(name string, fail bool, needs ...string) workflow.Task {
			return workflow.Task{Name: name, Needs: needs, TaskSpec: keel.TaskSpec{Type: typeMail, Payload: map[string]bool{"ok": !fail}}}
		}
		done, _, err := workflow.Enqueue(ctx, b.client, workflow.Spec{Name: "<b>reports</b>", Tasks: []workflow.Task{
			spec("sales", false), spec("stock", true), spec("mail", false, "sales", "stock"), spec("archive", false, "mail")}})
		if err != nil {
			t.Fatal(err)
		}
		waiting, _, err := workflow.Enqueue(ctx, b.client, workflow.Spec{Name: "waiting", Tasks: []workflow.Task{
			{Name: "first", TaskSpec: keel.TaskSpec{Type: typeReport}}, spec("second", false, "first")}})
		if err != nil {
			t.Fatal(err)
		}
		h := keel.NewHandlers()
		keel.Handle(h, typeMail, func(ctx context.Context, task *keel.Task[map[string]bool]) error {
			if task.Args["ok"] {
				return nil
			}
			return keel.Permanent(errors.New(evilError))
		})
		w, err := keel.NewClient(keel.Config{Driver: b.drv, Handlers: h, Logger: b.log, PollInterval: 20 * time.Millisecond,
			Alerts: keel.AlertConfig{Off: true}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			w.Stop(sctx) //nolint:errcheck // always nil
		}()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			info, err := workflow.Get(ctx, b.client, done.ID)
			if err != nil {
				t.Fatal(err)
			}
			if info.State == workflow.Failed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("workflow %+v not failed after 20s", info)
			}
		}
		get := func(path string) response {
			t.Helper()
			r := b.do(t, "GET", path, readToken, nil)
			if r.status != http.StatusOK {
				t.Fatalf("%s: status %d:\n%s", path, r.status, r.body)
			}
			checkPage(t, path, r)
			return r
		}
		has := func(path string, r response, want ...string) {
			t.Helper()
			for _, s := range want {
				if !strings.Contains(r.body, s) {
					t.Errorf("%s: no %q in the page", path, s)
				}
			}
		}
		r := get("/workflows")
		has("/workflows", r, fmt.Sprintf(`id="workflow-%d"`, done.ID), fmt.Sprintf(`id="workflow-%d"`, waiting.ID),
			`id="nav-workflows" href="/workflows" class="active"`, "&lt;b&gt;reports&lt;/b&gt;")
		if strings.Contains(r.body, "<b>reports</b>") {
			t.Error("/workflows: the name is not escaped")
		}
		ids := map[string]int64{}
		for _, n := range done.Tasks {
			ids[n.Name] = n.TaskID
		}
		path := fmt.Sprintf("/workflows/%d", done.ID)
		r = get(path)
		has(path, r, `id="workflow-state" class="badge big-badge state-failed">failed`, `<svg class="wf-graph"`,
			`id="node-mail"><g class="wf-node state-cancelled">`, `id="node-sales"><g class="wf-node state-succeeded">`,
			`id="node-stock"><g class="wf-node state-dead">`, fmt.Sprintf(`href="/tasks/%d" id="node-archive"`, ids["archive"]))
		if n := strings.Count(r.body, `class="wf-edge"`); n != 3 {
			t.Errorf("%s: %d arrows, want 3", path, n)
		}
		path = fmt.Sprintf("/workflows/%d", waiting.ID)
		has(path, get(path), `id="node-second"><g class="wf-node state-waiting">`, `<span class="badge state-waiting">waiting</span>`)
		path = fmt.Sprintf("/tasks/%d", ids["mail"])
		has(path, get(path), fmt.Sprintf("dependency %d (stock) is dead", ids["stock"]),
			fmt.Sprintf(`id="task-workflow"><a href="/workflows/%d">`, done.ID))
		for _, n := range waiting.Tasks {
			if n.Name == "second" {
				path = fmt.Sprintf("/tasks/%d", n.TaskID)
				has(path, get(path), `id="task-run-at">held: it waits`)
			}
		}
		if r := b.do(t, "GET", "/workflows/99999", readToken, nil); r.status != http.StatusNotFound {
			t.Errorf("/workflows/99999: status %d, want 404", r.status)
		}
		if r := b.do(t, "GET", "/workflows/x", readToken, nil); r.status != http.StatusBadRequest {
			t.Errorf("/workflows/x: status %d, want 400", r.status)
		}
	})
}
