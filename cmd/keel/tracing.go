package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelq/keel/cmd/keel/internal/config"
)

// newTracerProvider returns the tracer provider of keel serve's spans and
// its shutdown, which flushes the spans not yet sent. With no
// tracing.otlp_endpoint it returns nil (keel's default: the global
// provider, a no-op) and a shutdown that does nothing. The exporter
// connects lazily: nothing is sent before the first span ends.
func newTracerProvider(ctx context.Context, t config.Tracing) (trace.TracerProvider, func(context.Context) error, error) {
	if !t.Enabled() {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx, otlpOptions(t)...)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing.otlp_endpoint: %w", err)
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(attribute.String("service.name", t.ServiceName)))
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(t.SampleRatio))),
	)
	return tp, tp.Shutdown, nil
}

// otlpOptions maps a validated [tracing] onto the OTLP/HTTP exporter: a
// host:port endpoint (HTTPS unless insecure) or a URL (its scheme decides;
// without a path the exporter's /v1/traces).
func otlpOptions(t config.Tracing) []otlptracehttp.Option {
	ep := t.OTLPEndpoint
	if !strings.Contains(ep, "://") {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(ep)}
		if t.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return opts
	}
	u, _ := url.Parse(ep) // validated
	if u.Path == "" || u.Path == "/" {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return opts
	}
	return []otlptracehttp.Option{otlptracehttp.WithEndpointURL(ep)}
}
