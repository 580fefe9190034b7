package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// startProcessing starts the span of handling ev as a child of the span that
// produced it: the payments service puts the W3C traceparent of the request
// that made the payment succeed on the envelope (the CloudEvents
// distributed-tracing extension), so the consumer's work shows up in that
// request's trace. An event without one starts a trace of its own.
func startProcessing(ctx context.Context, ev Event) (context.Context, trace.Span) {
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": ev.Traceparent})
	return otel.Tracer("github.com/acme/paymentsvc/examples/consumer").Start(ctx, "process "+ev.Type,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.message.id", ev.ID),
			attribute.String("payment.id", ev.Data.ID),
		))
}

// setupTracing exports the consumer's spans over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set, like the
// payments service; otherwise the global no-op provider stays. The returned
// function flushes, waiting at most 5s.
func setupTracing(ctx context.Context, log *slog.Logger) (func(), error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" ||
		strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return func() {}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("consumer")), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	log.Info("tracing on")
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}, nil
}
