package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestWithCarrierKeepsTags(t *testing.T) {
	for _, tc := range []struct{ meta, want string }{
		{"", `{"traceparent":"` + parent + `"}`},
		{"null", `{"traceparent":"` + parent + `"}`},
		{`{"tenant":"t1","traceparent":"old"}`, `{"tenant":"t1","traceparent":"` + parent + `"}`},
	} {
		got, err := WithCarrier([]byte(tc.meta), map[string]string{KeyTraceparent: parent})
		if err != nil || string(got) != tc.want {
			t.Errorf("WithCarrier(%s) = %s, %v; want %s", tc.meta, got, err, tc.want)
		}
	}
	if got, _ := WithCarrier([]byte(`{"a":"b"}`), nil); string(got) != `{"a":"b"}` {
		t.Errorf("no carrier changed meta to %s", got)
	}
}

func TestExtract(t *testing.T) {
	ctx, ok := Extract(context.Background(), []byte(`{"tenant":"t1","traceparent":"`+parent+`","tracestate":"v=1"}`))
	sc := trace.SpanContextFromContext(ctx)
	if !ok || !sc.IsRemote() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.TraceState().String() != "v=1" {
		t.Fatalf("extracted %v %v", ok, sc)
	}
	for _, meta := range []string{"", `{"tenant":"t1"}`, `{"traceparent":"garbage"}`, `{"traceparent":1}`, `not json "traceparent"`} {
		if ctx, ok := Extract(context.Background(), []byte(meta)); ok || trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("Extract(%s) found a span context", meta)
		}
	}
	if Carrier(context.Background()) != nil {
		t.Error("Carrier of a context without a span is not nil")
	}
}
