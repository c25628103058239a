package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keelq/keel"
)

// A caller's W3C trace context, as an instrumented client sends it.
const (
	callerTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID      = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTraceID + "-" + callerSpanID + "-01"
	callerTracestate  = "vendor=abc"
)

// TestEnqueueJoinsCallersTrace: POST /v1/tasks with a traceparent header
// stores the trace context of an enqueue span in the caller's trace, and
// the task's attempt, run by another client, joins that trace.
func TestEnqueueJoinsCallersTrace(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, db string) {
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		t.Cleanup(func() { tp.Shutdown(context.Background()) })
		b := setup(t, db, Options{}, func(c *keel.Config) { c.TracerProvider = tp })

		var task Task
		b.call(t, "POST", "/v1/tasks", `{"type":"email.send","meta":{"tenant":"t1"}}`,
			"traceparent", callerTraceparent, "tracestate", callerTracestate).ok(t, http.StatusCreated, &task)
		var enq sdktrace.ReadOnlySpan
		for _, s := range sr.Ended() {
			if s.Name() == "keel.enqueue email.send" {
				enq = s
			}
		}
		if enq == nil {
			t.Fatal("no enqueue span")
		}
		if enq.SpanContext().TraceID().String() != callerTraceID || enq.Parent().SpanID().String() != callerSpanID || !enq.Parent().IsRemote() {
			t.Fatalf("enqueue span: trace %s parent %s, want the caller's %s %s",
				enq.SpanContext().TraceID(), enq.Parent().SpanID(), callerTraceID, callerSpanID)
		}
		var meta map[string]string
		if err := json.Unmarshal(task.Meta, &meta); err != nil {
			t.Fatalf("meta %s: %v", task.Meta, err)
		}
		wantParent := "00-" + callerTraceID + "-" + enq.SpanContext().SpanID().String() + "-01"
		if meta["traceparent"] != wantParent || meta["tracestate"] != callerTracestate || meta["tenant"] != "t1" {
			t.Fatalf("meta %v, want traceparent %s, tracestate %s and tenant t1", meta, wantParent, callerTracestate)
		}

		// Another process works the task: its attempt joins the trace.
		h := keel.NewHandlers()
		keel.Handle(h, typeEmail, func(ctx context.Context, task *keel.Task[json.RawMessage]) error { return nil })
		worker, err := keel.NewClient(keel.Config{Driver: b.drv, Handlers: h, TracerProvider: tp, Logger: b.log,
			PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := worker.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { worker.Stop(context.Background()) })
		waitState(t, b, task.ID, "succeeded")
		var att sdktrace.ReadOnlySpan
		for _, s := range sr.Ended() {
			if s.Name() == "keel.attempt email.send" {
				att = s
			}
		}
		if att == nil || att.SpanContext().TraceID().String() != callerTraceID || att.Parent().SpanID() != enq.SpanContext().SpanID() {
			t.Fatalf("attempt span %v does not continue the enqueue span %s in trace %s", att, enq.SpanContext().SpanID(), callerTraceID)
		}

		// A batch joins the caller's trace too, one enqueue span per task.
		var batch BatchResponse
		b.call(t, "POST", "/v1/tasks/batch", `{"tasks":[{"type":"email.send"},{"type":"report.build"}]}`,
			"traceparent", callerTraceparent).ok(t, http.StatusCreated, &batch)
		for _, bt := range batch.Tasks {
			var m map[string]string
			if err := json.Unmarshal(bt.Meta, &m); err != nil || len(m["traceparent"]) != 55 || m["traceparent"][3:35] != callerTraceID {
				t.Fatalf("batch task %d meta %s", bt.ID, bt.Meta)
			}
		}
	})
}

// TestTraceparentWithoutTracing: with keel's tracing off (the global
// no-op provider) the caller's trace context is still stored as sent, so
// the task's attempts in a traced worker join the caller's trace; a
// request without one stores nothing, and an invalid one is ignored.
func TestTraceparentWithoutTracing(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite", Options{})
	var task Task
	b.call(t, "POST", "/v1/tasks", `{"type":"email.send"}`, "traceparent", callerTraceparent).ok(t, http.StatusCreated, &task)
	if string(task.Meta) != `{"traceparent":"`+callerTraceparent+`"}` {
		t.Fatalf("meta %s, want the caller's traceparent", task.Meta)
	}
	for _, hdr := range []string{"", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "garbage"} {
		task = Task{}
		b.call(t, "POST", "/v1/tasks", `{"type":"email.send"}`, "traceparent", hdr).ok(t, http.StatusCreated, &task)
		if len(task.Meta) != 0 {
			t.Fatalf("traceparent %q: meta %s, want none", hdr, task.Meta)
		}
	}
}
