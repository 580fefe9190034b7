// Package tracing is the OpenTelemetry setup both binaries share, and the
// instrumentation of the service's edges: the HTTP server (Handler), the
// provider's HTTP client (Transport), the database (PgxTracer, StartTx), the
// outbox envelope (Traceparent) and the logs (Logger).
//
// Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set and OTEL_SDK_DISABLED is not
// true. Off, the SDK is never initialised and every function here hands back
// what it was given (the handler, the transport, the logger) or nothing (no
// pgx tracer, no traceparent), so the service runs exactly as without this
// package. Domain packages only pass ctx along; what is traced is decided here
// and at the wiring.
package tracing

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ShutdownTimeout bounds the flush of the spans still queued at shutdown:
// a collector that is down delays the exit by at most this.
const ShutdownTimeout = 5 * time.Second

// instrumentation is the name of the service's own tracer.
const instrumentation = "github.com/acme/paymentsvc"

// Span attributes the service sets. Never API keys, secrets or card data.
const (
	AttrTenantID  = attribute.Key("tenant.id")
	AttrPaymentID = attribute.Key("payment.id")
	AttrRefundID  = attribute.Key("refund.id")
	AttrRequestID = attribute.Key("request.id")
)

var enabled atomic.Bool

// Enabled reports whether tracing is on in this process.
func Enabled() bool { return enabled.Load() }

// Configured reports whether the environment (lookup) turns tracing on.
func Configured(lookup func(string) (string, bool)) bool {
	set := func(name string) bool {
		v, _ := lookup(name)
		return strings.TrimSpace(v) != ""
	}
	if v, _ := lookup("OTEL_SDK_DISABLED"); strings.EqualFold(strings.TrimSpace(v), "true") {
		return false
	}
	if v, _ := lookup("OTEL_TRACES_EXPORTER"); strings.EqualFold(strings.TrimSpace(v), "none") {
		return false
	}
	return set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
}

// Setup turns tracing on if the environment says so (see the package doc):
// an OTLP/HTTP exporter (which reads the standard OTEL_EXPORTER_OTLP_*
// variables itself) behind a batch span processor (OTEL_BSP_*: a bounded
// queue that drops spans rather than ever blocking a request, exports in the
// background with a timeout), the resource's service.name from
// OTEL_SERVICE_NAME or else serviceName, and the W3C tracecontext
// propagator. It must be called before the service is wired (the HTTP
// handler, the database pool and the provider client look at Enabled when
// they are built). The returned function flushes what is queued, waiting at
// most ShutdownTimeout; it is a no-op when tracing is off.
func Setup(ctx context.Context, serviceName string, log *slog.Logger) (shutdown func(), err error) {
	if !Configured(os.LookupEnv) {
		return func() {}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(serviceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, err
	}
	otel.SetErrorHandler(throttledErrors(log, time.Minute))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	Install(tp)
	name, _ := res.Set().Value(semconv.ServiceNameKey)
	log.Info("tracing on", "exporter", "otlp/http", "service_name", name.String())
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("tracing: spans not flushed at shutdown", "err", err)
		}
	}, nil
}

// Install makes tp the tracer provider of the process, the W3C tracecontext
// propagator its propagator, and turns tracing on (Enabled). Setup calls it;
// tests call it with an in-memory provider, before wiring what they test.
// The returned function turns tracing off again.
func Install(tp trace.TracerProvider) (restore func()) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	enabled.Store(true)
	return func() {
		enabled.Store(false)
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	}
}

// noSpan is a span that records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// Start starts a span named name as a child of ctx's span. Off, it starts
// nothing and returns ctx and a span that records nothing.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !Enabled() {
		return ctx, noSpan
	}
	return otel.Tracer(instrumentation).Start(ctx, name, trace.WithAttributes(attrs...))
}

// throttledErrors logs the SDK's errors (an unreachable collector, a full
// queue) at most once per every, so a collector that is down does not flood
// the log.
func throttledErrors(log *slog.Logger, every time.Duration) otel.ErrorHandler {
	var (
		mu      sync.Mutex
		last    time.Time
		dropped int
	)
	return otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if !last.IsZero() && time.Since(last) < every {
			dropped++
			return
		}
		log.Warn("tracing: export failed", "err", err, "suppressed_since_last", dropped)
		last, dropped = time.Now(), 0
	})
}
