package reconcile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/reconcile"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/tracing"
)

// With tracing on, a run is one span and each check a child span naming the
// payment it checked, with the check's database statements below it. Not
// parallel: tracing is process-wide.
func TestRunTracesEachCheck(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	b := setup(t)
	old := 10 * time.Minute
	ids := []string{
		b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown, Age: old}),
		b.attempt(chargeDeclined, testdb.AttemptOpts{Status: attempts.Unknown, Age: old}),
	}
	sum, err := b.reconciler(reconcile.Config{MinAge: reconcile.DefaultMinAge}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, sum.Checked)

	var run sdktrace.ReadOnlySpan
	checks := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "reconciler run":
			run = s
		case "reconciler check payment":
			for _, kv := range s.Attributes() {
				if kv.Key == "payment.id" {
					checks[kv.Value.AsString()] = s
				}
			}
		}
	}
	require.NotNil(t, run)
	require.Len(t, checks, 2)
	for _, id := range ids {
		c := checks[id]
		require.NotNil(t, c, "a span for the check of %s", id)
		require.Equal(t, run.SpanContext().SpanID(), c.Parent().SpanID())
		require.Equal(t, run.SpanContext().TraceID(), c.SpanContext().TraceID())
	}
	statements := 0
	for _, s := range rec.Ended() {
		if p := s.Parent().SpanID(); p == checks[ids[0]].SpanContext().SpanID() || p == checks[ids[1]].SpanContext().SpanID() {
			statements++
		}
	}
	require.Positive(t, statements, "the checks' work is below them")
}
