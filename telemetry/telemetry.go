package telemetry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Config names where spans go. The zero value turns tracing off.
type Config struct {
	// Endpoint is the OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces;
	// a URL without a path gets /v1/traces. Empty means tracing is off.
	Endpoint string
	// ServiceName is the service.name resource attribute ("memento" if empty).
	ServiceName string
	// Headers are sent with every export (an collector's API key, say).
	Headers map[string]string
}

// Tracing is a running tracer provider and its exporter.
type Tracing struct {
	provider   *sdktrace.TracerProvider
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
}

// TracerName is the instrumentation scope of every span Memento makes.
const TracerName = "github.com/mementohq/memento"

// Start builds the exporter and provider. With cfg.Endpoint empty it returns
// nil and no error: callers install nothing, so the hot path pays nothing.
func Start(ctx context.Context, cfg Config) (*Tracing, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(cfg.Endpoint)}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("start tracing: OTLP exporter for %s: %w", cfg.Endpoint, err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "memento"
	}
	res := resource.NewSchemaless(semconv.ServiceName(name))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
	)
	return &Tracing{
		provider:   tp,
		Tracer:     tp.Tracer(TracerName),
		Propagator: propagation.TraceContext{},
	}, nil
}

// Shutdown flushes pending spans and stops the exporter, bounded by ctx.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("stop tracing: %w", err)
	}
	return nil
}

// Flush exports the spans ended so far, bounded by ctx.
func (t *Tracing) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}
