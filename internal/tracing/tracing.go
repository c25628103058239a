// Package tracing carries keel's OpenTelemetry spans: the W3C trace
// context stored in a task's meta at enqueue and read back when an attempt
// starts, and the names of the span attributes keel sets.
//
// The trace context always travels as W3C traceparent and tracestate
// (propagation.TraceContext), whatever global propagator the program set,
// so that a task enqueued by one process joins the same trace in any
// other.
package tracing

import (
	"bytes"
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of keel's spans.
const TracerName = "github.com/keelq/keel"

// Keys of the trace context in a task's meta, as W3C names them.
const (
	KeyTraceparent = "traceparent"
	KeyTracestate  = "tracestate"
)

// Span attributes keel sets.
const (
	AttrSystem    = attribute.Key("messaging.system") // always "keel"
	AttrTaskID    = attribute.Key("keel.task.id")
	AttrType      = attribute.Key("keel.task.type")
	AttrQueue     = attribute.Key("keel.queue")
	AttrDuplicate = attribute.Key("keel.task.duplicate")
	AttrAttempt   = attribute.Key("keel.task.attempt")
	AttrNode      = attribute.Key("keel.node")
	AttrOutcome   = attribute.Key("keel.outcome")
)

// System is the value of AttrSystem.
var System = AttrSystem.String("keel")

var propagator = propagation.TraceContext{}

// Carrier returns the trace context of the span in ctx as meta entries
// (traceparent, and tracestate when there is one), or nil when ctx holds
// no valid span context: nothing is stored for an untraced enqueue.
func Carrier(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	propagator.Inject(ctx, m)
	return m
}

// WithCarrier returns meta (a JSON object or nil) with carrier's entries
// added, replacing those of the same name; the other keys are kept.
func WithCarrier(meta []byte, carrier map[string]string) ([]byte, error) {
	if len(carrier) == 0 {
		return meta, nil
	}
	all := map[string]json.RawMessage{}
	if len(meta) > 0 && string(meta) != "null" {
		if err := json.Unmarshal(meta, &all); err != nil {
			return nil, err
		}
	}
	for k, v := range carrier {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		all[k] = b
	}
	return json.Marshal(all)
}

// Extract returns ctx with the remote span context stored in meta, and
// whether meta held a valid one. Meta without a trace context, or one that
// does not parse, leaves ctx as it is.
func Extract(ctx context.Context, meta []byte) (context.Context, bool) {
	if !bytes.Contains(meta, []byte(`"`+KeyTraceparent+`"`)) {
		return ctx, false // most tasks: no decoding
	}
	var tc struct {
		Traceparent string `json:"traceparent"`
		Tracestate  string `json:"tracestate"`
	}
	if json.Unmarshal(meta, &tc) != nil || tc.Traceparent == "" {
		return ctx, false
	}
	m := propagation.MapCarrier{KeyTraceparent: tc.Traceparent}
	if tc.Tracestate != "" {
		m[KeyTracestate] = tc.Tracestate
	}
	sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), m))
	if !sc.IsValid() {
		return ctx, false
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc), true
}

// FromHeaders returns ctx with the W3C trace context of an incoming
// request's headers (traceparent, tracestate), if it has a valid one.
func FromHeaders(ctx context.Context, h propagation.HeaderCarrier) context.Context {
	return propagator.Extract(ctx, h)
}

// ToHeaders sets the W3C trace context of the span in ctx on outgoing
// request headers; without a valid span it sets nothing.
func ToHeaders(ctx context.Context, h propagation.HeaderCarrier) {
	propagator.Inject(ctx, h)
}
