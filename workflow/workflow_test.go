package workflow_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/workflow"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client is a client on a fresh SQLite file with handler fn for "step".
func client(t *testing.T, fn func(ctx context.Context, task *keel.Task[map[string]bool]) error) *keel.Client {
	t.Helper()
	drv, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "keel.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	h := keel.NewHandlers()
	keel.Handle(h, "step", fn)
	c, err := keel.NewClient(keel.Config{Driver: drv, Handlers: h, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWorkflowOnSQLite: a workflow enqueued, worked and read back; its
// tasks in s.Tasks' order, its nodes by id; bad specs refused.
func TestWorkflowOnSQLite(t *testing.T) {
	c := client(t, func(ctx context.Context, task *keel.Task[map[string]bool]) error {
		if task.Args["fail"] {
			return keel.Permanent(errors.New("no"))
		}
		return nil
	})
	task := func(name string, fail bool, needs ...string) workflow.Task {
		return workflow.Task{Name: name, Needs: needs, TaskSpec: keel.TaskSpec{Type: "step", Payload: map[string]bool{"fail": fail}}}
	}
	w, tasks, err := workflow.Enqueue(t.Context(), c, workflow.Spec{Name: "w", Tasks: []workflow.Task{
		task("last", false, "first"), task("first", false)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 2 || !tasks[0].Held || tasks[1].Held || w.Tasks[0].Name != "first" || w.State != workflow.Running {
		t.Fatalf("enqueued %+v, tasks %+v", w, tasks)
	}
	if _, _, err := workflow.Enqueue(t.Context(), c, workflow.Spec{Name: "bad", Tasks: []workflow.Task{task("a", false, "a")}}); !errors.Is(err, keel.ErrInvalid) {
		t.Fatalf("self-dependency: %v", err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background()) //nolint:errcheck // always nil
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := workflow.Get(t.Context(), c, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == workflow.Succeeded {
			if got.Tasks[1].Name != "last" || got.Tasks[1].Needs[0] != "first" || got.Tasks[1].State != keel.StateSucceeded {
				t.Fatalf("workflow %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %+v after 20s", got)
		}
	}
	if _, err := workflow.Get(t.Context(), c, 999); !errors.Is(err, keel.ErrNotFound) {
		t.Fatalf("unknown workflow: %v", err)
	}
}
