package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestConfigured(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": " "}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		got := Configured(func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
		if got != c.want {
			t.Errorf("%v: configured %v, want %v", c.env, got, c.want)
		}
	}
}

func TestStatementName(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"-- name: OutboxInsert :exec\nINSERT INTO outbox VALUES ($1)": "OutboxInsert",
		"\n-- name: IdemKeyGet :one\nSELECT 1":                        "IdemKeyGet",
		"commit":                                                      "COMMIT",
		"  select pg_advisory_lock($1)":                               "SELECT",
		"-- a comment\nUPDATE x SET y = 1":                            "UPDATE",
	} {
		if got := statementName(context.Background(), sql); got != want {
			t.Errorf("statementName(%q) = %q, want %q", sql, got, want)
		}
	}
}

// Off (the state of a process that never called Setup or Install), every
// edge is handed back untouched and nothing is recorded. The tests below
// that turn tracing on are not parallel, so this one never sees it on.
func TestOffChangesNothing(t *testing.T) {
	t.Parallel()
	if Enabled() {
		t.Skip("another test of this package has tracing on")
	}
	h := &struct{ http.Handler }{http.NotFoundHandler()}
	if Handler(h) != http.Handler(h) {
		t.Error("the handler is wrapped while off")
	}
	rt := http.DefaultTransport
	if Transport("provider", rt) != rt {
		t.Error("the transport is wrapped while off")
	}
	if PgxTracer() != nil {
		t.Error("a pgx tracer while off")
	}
	log := slog.New(slog.DiscardHandler)
	if Logger(log) != log {
		t.Error("the logger is wrapped while off")
	}
	ctx, span := Start(context.Background(), "x")
	if span.IsRecording() || Traceparent(ctx) != "" {
		t.Error("a span recorded while off")
	}
	if _, s := StartTx(ctx); s != nil {
		t.Error("a transaction span while off")
	}
}

// On, log records made with a traced context carry trace_id and span_id;
// records without one do not.
func TestLoggerAddsTraceIDs(t *testing.T) {
	restore := Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder())))
	defer restore()
	var buf bytes.Buffer
	log := Logger(slog.New(slog.NewJSONHandler(&buf, nil))).With("job", "test")
	ctx, span := Start(context.Background(), "work")
	log.InfoContext(ctx, "traced")
	span.End()
	log.Info("untraced")

	dec := json.NewDecoder(&buf)
	var traced, untraced map[string]any
	if err := dec.Decode(&traced); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&untraced); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if traced["trace_id"] != sc.TraceID().String() || traced["span_id"] != sc.SpanID().String() || traced["job"] != "test" {
		t.Errorf("traced line %v, want trace %s span %s", traced, sc.TraceID(), sc.SpanID())
	}
	if _, ok := untraced["trace_id"]; ok {
		t.Errorf("untraced line %v has a trace id", untraced)
	}
	want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
	if got := Traceparent(ctx); got != want {
		t.Errorf("Traceparent %q, want %q", got, want)
	}
}
