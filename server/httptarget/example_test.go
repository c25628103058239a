package httptarget_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver/sqlite"
	"github.com/keelq/keel/server/httptarget"
)

// A worker in any language is an HTTP endpoint: keel POSTs each task's
// payload to it, and a 2xx JSON answer becomes the task's result.
func ExampleRegister() {
	// The worker: here a Go handler, but any HTTP server will do.
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var args struct {
			Name string `json:"name"`
		}
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, "bad payload", http.StatusBadRequest) // dead-letters the task
			return
		}
		fmt.Println("worker got task", r.Header.Get("Keel-Task-Id"), "attempt", r.Header.Get("Keel-Attempt"),
			"key", r.Header.Get("Idempotency-Key"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"greeting":"hello, %s"}`, args.Name)
	}))
	defer worker.Close()

	dir, err := os.MkdirTemp("", "keel-httptarget-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	drv, err := sqlite.Open(ctx, filepath.Join(dir, "keel.db"), sqlite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer drv.Close()

	// Bind the task type to the worker's URL.
	h := keel.NewHandlers()
	if err := httptarget.Register(h, "greet", httptarget.Target{URL: worker.URL + "/greet"}, keel.MaxAttempts(5)); err != nil {
		log.Fatal(err)
	}
	c, err := keel.NewClient(keel.Config{Driver: drv, Handlers: h, Logger: slog.New(slog.DiscardHandler), PollInterval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Stop(ctx)

	info, err := c.Enqueue(ctx, "greet", map[string]string{"name": "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	for info.State != keel.StateSucceeded && info.State != keel.StateDead {
		time.Sleep(5 * time.Millisecond)
		if info, err = c.Get(ctx, info.ID); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(info.State, string(info.Result))
	// Output:
	// worker got task 1 attempt 1 key keel-task-1
	// succeeded {"greeting":"hello, Ada"}
}
