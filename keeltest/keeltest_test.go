package keeltest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelq/keel"
	"github.com/keelq/keel/keeltest"
)

// recorder is a testing.TB that records failures instead of failing the
// real test. Fatal calls end the calling goroutine like the real ones do,
// so run the code under test through record.
type recorder struct {
	testing.TB // unimplemented methods panic: the helpers must not need them
	mu         sync.Mutex
	failed     bool
	msgs       []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// record runs fn with a recorder and returns it once fn returned or
// called Fatalf.
func record(fn func(tb testing.TB)) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

func newEnqueueClient(t *testing.T) *keel.Client {
	return keeltest.NewClient(t, keel.Config{Types: []string{"email.send", "image.resize"}})
}

func TestRequireEnqueuedFindsCanonicalPayload(t *testing.T) {
	t.Parallel()
	c := newEnqueueClient(t)
	ctx := context.Background()
	// Enqueued with keys in another order and extra whitespace.
	want, err := c.Enqueue(ctx, "email.send", json.RawMessage(`{ "subject": "hi",  "to": "a@example.com" }`), keel.Priority(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(ctx, "email.send", emailArgs{To: "b@example.com", Subject: "hi"}); err != nil {
		t.Fatal(err)
	}
	got := keeltest.RequireEnqueued(t, c, "email.send", emailArgs{To: "a@example.com", Subject: "hi"})
	if got == nil || got.ID != want.ID || got.Priority != 5 {
		t.Fatalf("RequireEnqueued returned %+v, want task %d", got, want.ID)
	}
	// map and raw JSON forms of the same payload match too.
	keeltest.RequireEnqueued(t, c, "email.send", map[string]string{"to": "b@example.com", "subject": "hi"})
	keeltest.RequireEnqueued(t, c, "email.send", []byte(`{"to":"b@example.com","subject":"hi"}`))
	keeltest.RequireNotEnqueued(t, c, "email.send", emailArgs{To: "c@example.com", Subject: "hi"})
	keeltest.RequireNotEnqueued(t, c, "image.resize", nil)
}

func TestRequireEnqueuedFailureListsWhatWasThere(t *testing.T) {
	t.Parallel()
	c := newEnqueueClient(t)
	ctx := context.Background()
	for _, to := range []string{"a@example.com", "b@example.com"} {
		if _, err := c.Enqueue(ctx, "email.send", emailArgs{To: to, Subject: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	returned := false
	r := record(func(tb testing.TB) {
		keeltest.RequireEnqueued(tb, c, "email.send", emailArgs{To: "c@example.com", Subject: "hi"})
		returned = true
	})
	if !r.failed || returned {
		t.Fatalf("RequireEnqueued of a missing payload: failed=%v returned=%v, want a fatal failure", r.failed, returned)
	}
	out := r.output()
	for _, want := range []string{
		`no "email.send" task with payload {"subject":"hi","to":"c@example.com"}`,
		`the 2 "email.send" task(s) enqueued`,
		`payload={"subject":"hi","to":"a@example.com"}`,
		`payload={"subject":"hi","to":"b@example.com"}`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("failure message lacks %q:\n%s", want, out)
		}
	}

	// No task of the type at all: the message names the types present.
	r = record(func(tb testing.TB) { keeltest.RequireEnqueued(tb, c, "image.resize", map[string]int{"w": 1}) })
	if !r.failed || !strings.Contains(r.output(), `no "image.resize" tasks at all; enqueued types: "email.send" ×2`) {
		t.Errorf("failed=%v, message:\n%s", r.failed, r.output())
	}

	// Same payload, other type: no match.
	r = record(func(tb testing.TB) {
		keeltest.RequireEnqueued(tb, c, "image.resize", emailArgs{To: "a@example.com", Subject: "hi"})
	})
	if !r.failed {
		t.Error("RequireEnqueued matched a task of another type")
	}
}

func TestRequireEnqueuedOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	c := newEnqueueClient(t)
	r := record(func(tb testing.TB) { keeltest.RequireEnqueued(tb, c, "email.send", nil) })
	if !r.failed || !strings.Contains(r.output(), "no tasks were enqueued at all") {
		t.Fatalf("failed=%v, message:\n%s", r.failed, r.output())
	}
}

func TestRequireNotEnqueuedFailure(t *testing.T) {
	t.Parallel()
	c := newEnqueueClient(t)
	ti, err := c.Enqueue(context.Background(), "image.resize", map[string]int{"w": 100})
	if err != nil {
		t.Fatal(err)
	}
	r := record(func(tb testing.TB) { keeltest.RequireNotEnqueued(tb, c, "image.resize", map[string]int{"w": 100}) })
	if !r.failed || !strings.Contains(r.output(), fmt.Sprintf("#%d image.resize pending", ti.ID)) {
		t.Fatalf("failed=%v, message:\n%s", r.failed, r.output())
	}
	r = record(func(tb testing.TB) { keeltest.RequireNotEnqueued(tb, c, "image.resize", nil) })
	if !r.failed {
		t.Fatal("RequireNotEnqueued(nil payload) passed with a task of the type present")
	}
}

func TestNewClientRejectsADriver(t *testing.T) {
	t.Parallel()
	other := newEnqueueClient(t)
	r := record(func(tb testing.TB) { keeltest.NewClient(tb, keel.Config{Driver: other.Driver()}) })
	if !r.failed || !strings.Contains(r.output(), "leave Config.Driver nil") {
		t.Fatalf("failed=%v, message:\n%s", r.failed, r.output())
	}
}

func TestNewClientRunsRetriesQuickly(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	h := keel.NewHandlers()
	keel.Handle(h, "flaky", func(ctx context.Context, task *keel.Task[string]) error {
		runs.Add(1)
		if task.Attempt < 3 {
			return errors.New("not yet")
		}
		return task.SetResult("done: " + task.Args)
	})
	c := keeltest.NewClient(t, keel.Config{Handlers: h})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ti, err := c.Enqueue(context.Background(), "flaky", "x")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	done := keeltest.WaitFinished(t, c, ti.ID, 5*time.Second)
	if done.State != keel.StateSucceeded || done.Attempt != 3 || len(done.Errors) != 2 || string(done.Result) != `"done: x"` {
		t.Fatalf("task = %+v, want succeeded on attempt 3 with 2 errors", done)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("two retries took %v; NewClient's short backoff and poll should make this fast", el)
	}
	if runs.Load() != 3 {
		t.Errorf("handler ran %d times, want 3", runs.Load())
	}
}

func TestWaitFinishedTimesOut(t *testing.T) {
	t.Parallel()
	c := newEnqueueClient(t) // never started: the task stays pending
	ti, err := c.Enqueue(context.Background(), "email.send", emailArgs{To: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	r := record(func(tb testing.TB) { keeltest.WaitFinished(tb, c, ti.ID, 30*time.Millisecond) })
	if !r.failed || !strings.Contains(r.output(), "not finished after 30ms") || !strings.Contains(r.output(), "pending") {
		t.Fatalf("failed=%v, message:\n%s", r.failed, r.output())
	}
}
