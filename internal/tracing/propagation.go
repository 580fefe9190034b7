package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Traceparent is the W3C traceparent of ctx's span ("00-<trace id>-<span
// id>-<flags>"), for the outbox row of an event the span produced, or "" when
// tracing is off or ctx holds no span.
func Traceparent(ctx context.Context) string {
	if !Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c.Get("traceparent")
}
