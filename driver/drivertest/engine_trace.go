package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel"
	"github.com/keelq/keel/driver"
)

// testClaimMeta: a claim returns the task's meta, which carries the
// enqueue's trace context to the attempt.
func testClaimMeta(t *testing.T, e *env) {
	meta := `{"tenant":"t1","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`
	with := e.insert(func(p *driver.InsertParams) { p.Meta = []byte(meta) })
	without := e.insert(func(p *driver.InsertParams) { p.Payload = []byte(`{"n":2}`) })
	rows := e.claim("w1", e.clock.Now(), 10)
	if len(rows) != 2 {
		t.Fatalf("claimed %d tasks, want 2", len(rows))
	}
	for _, r := range rows {
		switch r.ID {
		case with.ID:
			if !jsonEqual(r.Meta, []byte(meta)) {
				t.Fatalf("claimed meta %s, want %s", r.Meta, meta)
			}
		case without.ID:
			if len(r.Meta) != 0 {
				t.Fatalf("claimed meta %q of a task without one", r.Meta)
			}
		}
	}
}

// traceRecorder is an OpenTelemetry SDK provider recording every span in
// memory.
type traceRecorder struct {
	*tracetest.SpanRecorder
	tp *sdktrace.TracerProvider
}

func newTraceRecorder(t *testing.T) *traceRecorder {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) }) //nolint:errcheck // in memory
	return &traceRecorder{SpanRecorder: sr, tp: tp}
}

// spans returns the ended spans named name whose task id is id.
func (r *traceRecorder) spans(name string, id int64) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.Ended() {
		if s.Name() == name && spanAttr(s, "keel.task.id").AsInt64() == id {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// one returns the only span named name of task id.
func (r *traceRecorder) one(t *testing.T, name string, id int64) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := r.spans(name, id)
	if len(spans) != 1 {
		t.Fatalf("%d spans %q of task %d, want 1 (all: %d)", len(spans), name, id, len(r.Ended()))
	}
	return spans[0]
}

// testEngineTraces: every enqueue has a producer span, a child of the
// caller's span; every attempt a consumer span, a child of the enqueue's
// span through the trace context stored in the task's meta, also on a
// retry; the handler's context carries the attempt's span.
func testEngineTraces(t *testing.T, e *env) {
	rec := newTraceRecorder(t)
	var mu sync.Mutex
	seen := map[[2]int64]trace.SpanContext{} // [task id, attempt] → the handler's span
	c := e.worker(keel.Config{TracerProvider: rec.tp, BackoffJitter: -1}, func(ctx context.Context, task *keel.Task[args]) error {
		mu.Lock()
		seen[[2]int64{task.ID, int64(task.Attempt)}] = trace.SpanContextFromContext(ctx)
		mu.Unlock()
		if task.Args.N == 2 && task.Attempt == 1 {
			return errors.New("boom")
		}
		return nil
	})
	handlerSpan := func(id int64, attempt int64) trace.SpanContext {
		mu.Lock()
		defer mu.Unlock()
		return seen[[2]int64{id, attempt}]
	}

	ctx, parent := rec.tp.Tracer("test").Start(e.ctx, "request")
	one, err := c.Enqueue(ctx, "dt.task", args{N: 1}, keel.Meta(map[string]string{"tenant": "t1"}))
	if err != nil {
		t.Fatal(err)
	}
	dup, err := c.Enqueue(ctx, "dt.task", args{N: 1}, keel.UniqueBy("one"))
	if err != nil {
		t.Fatal(err)
	}
	retried, err := c.Enqueue(ctx, "dt.task", args{N: 2})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Enqueue(ctx, "dt.task", args{N: 1}, keel.UniqueBy("one"))
	if err != nil || !again.Duplicate || again.ID != dup.ID {
		t.Fatalf("second UniqueBy enqueue: %+v, %v", again, err)
	}
	parent.End()
	root := e.enqueue(c, 3) // no span in its context: the enqueue span starts a trace
	// A client with the default provider (the global no-op) and no span
	// in its context stores no trace context.
	plain, err := e.enqueuer().Enqueue(e.ctx, "dt.task", args{N: 4})
	if err != nil {
		t.Fatal(err)
	}
	traceID := parent.SpanContext().TraceID()

	// The enqueue spans: children of the caller's span, one per call.
	enq := rec.one(t, "keel.enqueue dt.task", one.ID)
	if enq.Parent().SpanID() != parent.SpanContext().SpanID() || enq.SpanContext().TraceID() != traceID ||
		enq.SpanKind() != trace.SpanKindProducer {
		t.Fatalf("enqueue span: parent %s trace %s kind %s", enq.Parent().SpanID(), enq.SpanContext().TraceID(), enq.SpanKind())
	}
	if spanAttr(enq, "keel.task.type").AsString() != "dt.task" || spanAttr(enq, "keel.queue").AsString() != "default" ||
		spanAttr(enq, "keel.task.duplicate").AsBool() {
		t.Fatalf("enqueue span attributes %v", enq.Attributes())
	}
	dups := rec.spans("keel.enqueue dt.task", dup.ID)
	if len(dups) != 2 || spanAttr(dups[0], "keel.task.duplicate").AsBool() || !spanAttr(dups[1], "keel.task.duplicate").AsBool() {
		t.Fatalf("the UniqueBy task's enqueue spans: %d, duplicate %v then %v", len(dups),
			spanAttr(dups[0], "keel.task.duplicate"), spanAttr(dups[len(dups)-1], "keel.task.duplicate"))
	}

	// The stored trace context names the enqueue span, the tags are kept.
	var meta map[string]string
	if err := json.Unmarshal(e.get(one.ID).Meta, &meta); err != nil {
		t.Fatalf("meta: %v", err)
	}
	want := "00-" + traceID.String() + "-" + enq.SpanContext().SpanID().String() + "-01"
	if meta["traceparent"] != want || meta["tenant"] != "t1" || len(meta) != 2 {
		t.Fatalf("meta %v, want tenant t1 and traceparent %s", meta, want)
	}
	if m := e.get(plain.ID).Meta; len(m) != 0 {
		t.Fatalf("an untraced enqueue stored meta %s", m)
	}

	// The attempts: children of their enqueue spans, in the caller's trace.
	e.waitState(one.ID, driver.StateSucceeded)
	att := rec.one(t, "keel.attempt dt.task", one.ID)
	if att.SpanContext().TraceID() != traceID || att.Parent().SpanID() != enq.SpanContext().SpanID() ||
		!att.Parent().IsRemote() || att.SpanKind() != trace.SpanKindConsumer {
		t.Fatalf("attempt span: trace %s parent %s (remote %v) kind %s, want trace %s parent %s",
			att.SpanContext().TraceID(), att.Parent().SpanID(), att.Parent().IsRemote(), att.SpanKind(), traceID, enq.SpanContext().SpanID())
	}
	if spanAttr(att, "keel.task.attempt").AsInt64() != 1 || spanAttr(att, "keel.node").AsString() != c.Node() ||
		spanAttr(att, "keel.queue").AsString() != "default" || spanAttr(att, "keel.outcome").AsString() != "succeeded" ||
		att.Status().Code == codes.Error {
		t.Fatalf("attempt span attributes %v status %v", att.Attributes(), att.Status())
	}
	if got := handlerSpan(one.ID, 1); got.SpanID() != att.SpanContext().SpanID() {
		t.Fatalf("the handler's context holds span %s, want the attempt's %s", got.SpanID(), att.SpanContext().SpanID())
	}

	// A retried task's attempts are both in the trace, children of its
	// enqueue span; the failed one says why.
	e.waitErrors(retried.ID, 1)
	e.clock.Advance(time.Minute)
	e.waitState(retried.ID, driver.StateSucceeded)
	enq2 := rec.one(t, "keel.enqueue dt.task", retried.ID)
	atts := rec.spans("keel.attempt dt.task", retried.ID)
	if len(atts) != 2 {
		t.Fatalf("%d attempt spans of the retried task, want 2", len(atts))
	}
	for i, a := range atts {
		if a.SpanContext().TraceID() != traceID || a.Parent().SpanID() != enq2.SpanContext().SpanID() ||
			spanAttr(a, "keel.task.attempt").AsInt64() != int64(i+1) {
			t.Fatalf("attempt %d span: trace %s parent %s attempt %v", i+1, a.SpanContext().TraceID(), a.Parent().SpanID(),
				spanAttr(a, "keel.task.attempt"))
		}
	}
	if st := atts[0].Status(); st.Code != codes.Error || st.Description != "boom" || spanAttr(atts[0], "keel.outcome").AsString() != "error" {
		t.Fatalf("failed attempt: status %v outcome %v", st, spanAttr(atts[0], "keel.outcome"))
	}
	if spanAttr(atts[1], "keel.outcome").AsString() != "succeeded" {
		t.Fatalf("second attempt outcome %v", spanAttr(atts[1], "keel.outcome"))
	}
	if handlerSpan(retried.ID, 1).SpanID() != atts[0].SpanContext().SpanID() || handlerSpan(retried.ID, 2).SpanID() != atts[1].SpanContext().SpanID() {
		t.Fatal("the retried task's handlers did not run in their attempts' spans")
	}

	// An enqueue outside any span starts a trace, which its attempt joins.
	e.waitState(root.ID, driver.StateSucceeded)
	rootEnq := rec.one(t, "keel.enqueue dt.task", root.ID)
	if a := rec.one(t, "keel.attempt dt.task", root.ID); rootEnq.Parent().IsValid() || rootEnq.SpanContext().TraceID() == traceID ||
		a.Parent().SpanID() != rootEnq.SpanContext().SpanID() || a.SpanContext().TraceID() != rootEnq.SpanContext().TraceID() {
		t.Fatalf("enqueue without a span: enqueue parent %s, attempt parent %s (enqueue span %s)",
			rootEnq.Parent().SpanID(), a.Parent().SpanID(), rootEnq.SpanContext().SpanID())
	}
	// Without a stored trace context an attempt starts a trace of its own,
	// not a child of the span of Start's context.
	e.waitState(plain.ID, driver.StateSucceeded)
	if a := rec.one(t, "keel.attempt dt.task", plain.ID); a.Parent().IsValid() || a.SpanContext().TraceID() == traceID {
		t.Fatalf("untraced task's attempt: parent %s trace %s", a.Parent().SpanID(), a.SpanContext().TraceID())
	}
}

// testEngineTracesMany: each task of one EnqueueMany has its own enqueue
// span and its attempt is that span's child.
func testEngineTracesMany(t *testing.T, e *env) {
	rec := newTraceRecorder(t)
	c := e.worker(keel.Config{TracerProvider: rec.tp}, func(ctx context.Context, task *keel.Task[args]) error { return nil })
	ctx, parent := rec.tp.Tracer("test").Start(e.ctx, "batch")
	infos, err := c.EnqueueMany(ctx, []keel.TaskSpec{{Type: "dt.task", Payload: args{N: 1}}, {Type: "dt.task", Payload: args{N: 2}}})
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		e.waitState(info.ID, driver.StateSucceeded)
		enq := rec.one(t, "keel.enqueue dt.task", info.ID)
		att := rec.one(t, "keel.attempt dt.task", info.ID)
		if enq.Parent().SpanID() != parent.SpanContext().SpanID() || att.Parent().SpanID() != enq.SpanContext().SpanID() ||
			att.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Fatalf("task %d: enqueue parent %s, attempt parent %s (enqueue span %s)", info.ID,
				enq.Parent().SpanID(), att.Parent().SpanID(), enq.SpanContext().SpanID())
		}
	}
}
