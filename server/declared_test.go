package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/keelq/keel"
)

// TestEnqueueAppliesDeclaredDefaults: a task type's defaults declared by
// the process that works it (stored in the database) apply to tasks
// enqueued over the API, whose client only lists the type; fields the
// request sets still win, and a batch applies them too.
func TestEnqueueAppliesDeclaredDefaults(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		b := setup(t, db, Options{})
		h := keel.NewHandlers()
		keel.Declare(h, typeEmail, keel.Queue("mail"), keel.Priority(4), keel.MaxAttempts(6), keel.Timeout(45*time.Second))
		worker, err := keel.NewClient(keel.Config{Driver: b.drv, Handlers: h, Logger: b.log})
		if err != nil {
			t.Fatal(err)
		}
		// Its first enqueue stores its declarations.
		if _, err := worker.Enqueue(t.Context(), typeEmail, nil); err != nil {
			t.Fatal(err)
		}

		var task Task
		b.call(t, "POST", "/v1/tasks", `{"type": "email.send", "payload": {"n": 1}}`).ok(t, http.StatusCreated, &task)
		if task.Queue != "mail" || task.Priority != 4 || task.MaxAttempts != 6 || time.Duration(task.Timeout) != 45*time.Second {
			t.Fatalf("declared defaults not applied over the API: %+v", task)
		}
		b.call(t, "POST", "/v1/tasks", `{"type": "email.send", "payload": {"n": 2}, "priority": 1, "queue": "other"}`).
			ok(t, http.StatusCreated, &task)
		if task.Queue != "other" || task.Priority != 1 || task.MaxAttempts != 6 {
			t.Fatalf("request fields over declared defaults: %+v", task)
		}
		var batch BatchResponse
		b.call(t, "POST", "/v1/tasks/batch", `{"tasks": [{"type": "email.send", "payload": {"n": 3}}, {"type": "report.build", "payload": {"n": 4}}]}`).
			ok(t, http.StatusCreated, &batch)
		if len(batch.Tasks) != 2 || batch.Tasks[0].Queue != "mail" || batch.Tasks[0].MaxAttempts != 6 ||
			batch.Tasks[1].Queue != keel.DefaultQueue {
			t.Fatalf("batch: %+v", batch.Tasks)
		}
	})
}
