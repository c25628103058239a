package tracing

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/keelq/keel/driver"
)

// TestStartEnqueue: each task gets a producer span named after its type,
// a child of the span in ctx, and its meta carries that span's trace
// context, next to the meta it had; without tracing nothing is stored.
func TestStartEnqueue(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer(TracerName)
	ctx, parent := tracer.Start(context.Background(), "caller")
	params := []driver.InsertParams{
		{Type: "email.send", Queue: "default"},
		{Type: "report", Queue: "reports", Meta: []byte(`{"tenant":"acme"}`)},
	}
	spans, err := StartEnqueue(ctx, tracer, params)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range spans {
		s.End()
	}
	parent.End()
	ended := rec.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans ended, want 2 enqueue spans and the caller's", len(ended))
	}
	for i, p := range params {
		s := ended[i]
		if s.Name() != "keel.enqueue "+p.Type || s.SpanKind() != trace.SpanKindProducer || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("task %d: span %q kind %v parent %v", i, s.Name(), s.SpanKind(), s.Parent().SpanID())
		}
		var meta map[string]string
		if err := json.Unmarshal(p.Meta, &meta); err != nil {
			t.Fatalf("task %d meta %s: %v", i, p.Meta, err)
		}
		got, ok := Extract(context.Background(), p.Meta)
		if !ok || trace.SpanContextFromContext(got).SpanID() != s.SpanContext().SpanID() {
			t.Errorf("task %d: meta %s does not carry its enqueue span", i, p.Meta)
		}
	}
	if params[1].Meta == nil || !json.Valid(params[1].Meta) || string(params[1].Meta) == `{"tenant":"acme"}` {
		t.Errorf("the second task's meta lost its entries or got no trace context: %s", params[1].Meta)
	}
	var m map[string]string
	_ = json.Unmarshal(params[1].Meta, &m)
	if m["tenant"] != "acme" {
		t.Errorf("the caller's meta entry is gone: %s", params[1].Meta)
	}

	plain := []driver.InsertParams{{Type: "x", Queue: "default"}}
	if _, err := StartEnqueue(context.Background(), noop.NewTracerProvider().Tracer(TracerName), plain); err != nil {
		t.Fatal(err)
	}
	if plain[0].Meta != nil {
		t.Errorf("without a span the meta is %s, want nothing stored", plain[0].Meta)
	}
}
