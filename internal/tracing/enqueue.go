package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel/driver"
)

// enqueueSpan are the options of every enqueue span, made once.
var enqueueSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}

// StartEnqueue starts one producer span per task, a child of the
// span in ctx, and stores each span's W3C trace context in its task's
// meta, so that the task's attempts join the trace. A task enqueued
// without any span context stores nothing.
func StartEnqueue(ctx context.Context, tracer trace.Tracer, params []driver.InsertParams) ([]trace.Span, error) {
	spans := make([]trace.Span, len(params))
	for i := range params {
		p := &params[i]
		sctx, span := tracer.Start(ctx, "keel.enqueue", enqueueSpan...)
		if span.IsRecording() { // without tracing, no name or attributes are built
			span.SetName("keel.enqueue " + p.Type)
			span.SetAttributes(System, AttrType.String(p.Type), AttrQueue.String(p.Queue))
		}
		spans[i] = span
		meta, err := WithCarrier(p.Meta, Carrier(sctx))
		if err != nil { // our own JSON: cannot happen
			for _, s := range spans[:i+1] {
				s.End()
			}
			return nil, fmt.Errorf("enqueue: store the trace context: %w", err)
		}
		p.Meta = meta
	}
	return spans, nil
}
