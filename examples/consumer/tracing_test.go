package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The processing span of an event continues the trace of the request that
// produced it (the envelope's traceparent); an event without one starts a
// trace of its own. Not parallel: the tracer provider is process-wide.
func TestProcessingSpanContinuesTheTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	b := setup(t)
	ctx := context.Background()
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, ev := range []map[string]any{
		{"id": "evt_traced", "traceparent": traceparent},
		{"id": "evt_untraced"},
	} {
		ev["specversion"], ev["source"], ev["type"], ev["time"] = "1.0", "paymentsvc", "PaymentSucceeded", time.Now().UTC().Format(time.RFC3339Nano)
		ev["data"] = map[string]any{"id": "pay_" + ev["id"].(string), "tenant_id": "ten_1", "order_id": "o1", "amount": 100, "currency": "EUR"}
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.js.Publish(ctx, b.cfg.Subject, data, jetstream.WithMsgID(ev["id"].(string))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := b.js.CreateOrUpdateConsumer(ctx, b.cfg.Stream, jetstream.ConsumerConfig{
		Durable: "fulfilment", FilterSubject: b.cfg.Subject, AckPolicy: jetstream.AckExplicitPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if applied, err := b.inbox.Handle(ctx, next(t, cons)); err != nil || !applied {
			t.Fatalf("applied %v, err %v", applied, err)
		}
	}

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "messaging.message.id" {
				spans[kv.Value.AsString()] = s
			}
		}
	}
	traced, untraced := spans["evt_traced"], spans["evt_untraced"]
	if traced == nil || untraced == nil {
		t.Fatalf("processing spans %v", spans)
	}
	wantTrace, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	wantParent, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	if traced.Name() != "process PaymentSucceeded" || traced.SpanKind() != trace.SpanKindConsumer ||
		traced.SpanContext().TraceID() != wantTrace || traced.Parent().SpanID() != wantParent {
		t.Errorf("traced event: span %q kind %v trace %s parent %s", traced.Name(), traced.SpanKind(),
			traced.SpanContext().TraceID(), traced.Parent().SpanID())
	}
	if untraced.Parent().IsValid() || untraced.SpanContext().TraceID() == wantTrace {
		t.Errorf("untraced event: parent %v, trace %s; want a new trace", untraced.Parent(), untraced.SpanContext().TraceID())
	}
}
