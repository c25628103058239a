package engine

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel/driver"
	"github.com/keelq/keel/internal/tracing"
)

// Outcomes of an attempt span that the error history does not name.
const (
	outcomeSucceeded = "succeeded"
	outcomeSnoozed   = "snoozed"
	outcomeReleased  = "released" // the worker stopped: the task went back to pending, no attempt used
)

// The options of attempt spans, made once: every attempt starts a span,
// traced or not.
var (
	childAttempt = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	rootAttempt  = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithNewRoot()}
)

// startAttemptSpan starts the consumer span of one attempt of row: a child
// of the trace context stored in the task's meta at enqueue, or a new
// root when there is none. The returned ctx carries the span, so the
// handler (and the calls it makes) continue the trace.
func (e *Engine) startAttemptSpan(ctx context.Context, row *driver.TaskRow) (context.Context, trace.Span) {
	pctx, ok := tracing.Extract(ctx, row.Meta)
	var span trace.Span
	if ok {
		ctx, span = e.cfg.Tracer.Start(pctx, "keel.attempt", childAttempt...)
	} else {
		// Not a child of whatever span the context of Start held.
		ctx, span = e.cfg.Tracer.Start(ctx, "keel.attempt", rootAttempt...)
	}
	if span.IsRecording() { // without tracing, no name or attributes are built
		span.SetName("keel.attempt " + row.Type)
		span.SetAttributes(tracing.System, tracing.AttrTaskID.Int64(row.ID), tracing.AttrType.String(row.Type),
			tracing.AttrQueue.String(row.Queue), tracing.AttrAttempt.Int(row.Attempt), tracing.AttrNode.String(e.cfg.Node))
	}
	return ctx, span
}

// endAttemptSpan records the attempt's outcome t (and err, the handler's
// error) on span and ends it.
func endAttemptSpan(span trace.Span, t driver.Transition, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	outcome := outcomeSucceeded
	switch {
	case t.Error != nil:
		outcome = string(t.Error.Outcome)
		if err != nil {
			span.RecordError(err)
		}
		span.SetStatus(codes.Error, t.Error.Error)
	case t.Snooze:
		outcome = outcomeSnoozed
	case t.Refund:
		outcome = outcomeReleased
	}
	span.SetAttributes(tracing.AttrOutcome.String(outcome))
	span.End()
}
