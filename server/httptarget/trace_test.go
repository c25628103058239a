package httptarget_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keelq/keel"
	"github.com/keelq/keel/keeltest"
	"github.com/keelq/keel/server/httptarget"
)

// TestTraceparent: the target receives the attempt span's W3C trace
// context, in the trace of the span that enqueued the task, on every
// attempt; an untraced attempt sends no traceparent.
func TestTraceparent(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/flaky" && n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	h := keel.NewHandlers()
	mustRegister(t, h, "flaky", httptarget.Target{URL: tg.URL + "/flaky"})
	c := keeltest.NewClient(t, keel.Config{Handlers: h, BackoffJitter: -1, TracerProvider: tp})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	info, err := c.Enqueue(ctx, "flaky", map[string]int{"n": 1})
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	if got := keeltest.WaitFinished(t, c, info.ID, 10*time.Second); got.State != keel.StateSucceeded {
		t.Fatalf("task %s", got.State)
	}
	reqs := tg.requests("/flaky")
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var attempts []string // the attempt spans' ids, in order
	for _, s := range sr.Ended() {
		if s.Name() == "keel.attempt flaky" {
			attempts = append(attempts, s.SpanContext().SpanID().String())
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	for i, r := range reqs {
		want := "00-" + parent.SpanContext().TraceID().String() + "-" + attempts[i] + "-01"
		if got := r.Header.Get("traceparent"); got != want {
			t.Fatalf("request %d: traceparent %q, want %q (the attempt's span in the caller's trace)", i+1, got, want)
		}
	}
}

// TestNoTraceparentUntraced: without a tracer provider and a span, no
// trace context is sent.
func TestNoTraceparentUntraced(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusNoContent) })
	c := start(t, func(h *keel.Handlers) { mustRegister(t, h, "hook", httptarget.Target{URL: tg.URL + "/hook"}) })
	info := enqueue(t, c, "hook", nil)
	keeltest.WaitFinished(t, c, info.ID, 10*time.Second)
	for k := range tg.requests("/hook")[0].Header {
		if strings.EqualFold(k, "traceparent") || strings.EqualFold(k, "tracestate") {
			t.Fatalf("untraced request carries %s", k)
		}
	}
}
