package outbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testkit"
	"github.com/acme/paymentsvc/internal/tracing"
)

const testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// The relay publishes each row's traceparent on its envelope.
func TestRelayPublishesTraceparent(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	ids := b.insertEvents(t, 2)
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE outbox SET traceparent = $1 WHERE id = $2`, testTraceparent, ids[0]); err != nil {
		t.Fatal(err)
	}
	runRelay(t, newRelay(t, b.db.Pool, b.cfg))
	waitDrained(t, b.db.Pool, 30*time.Second)
	_, envs := streamEvents(t, b.js, b.cfg.Stream)
	got := map[string]string{}
	for _, e := range envs {
		got[e.ID] = e.Traceparent
	}
	if got[ids[0]] != testTraceparent || got[ids[1]] != "" || len(got) != 2 {
		t.Errorf("traceparents by event %v, want %s on %s only", got, testTraceparent, ids[0])
	}
}

// Enqueue keeps the traceparent of ctx's span when tracing is on, and none
// when it is off. Not parallel: tracing is process-wide.
func TestEnqueueKeepsTraceparent(t *testing.T) {
	b := setup(t, testkit.NATSURL())
	// Three payments whose events are enqueued again below.
	var payments []string
	for _, id := range b.insertEvents(t, 3) {
		var pid string
		if err := b.db.Pool.QueryRow(context.Background(), `DELETE FROM outbox WHERE id = $1 RETURNING payment_id`, id).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		payments = append(payments, pid)
	}
	enqueue := func(ctx context.Context, id string) *string {
		t.Helper()
		var tp *string
		err := db.WithTx(ctx, b.db.Pool, func(tx pgx.Tx) error {
			evID, err := outbox.Enqueue(ctx, tx, outbox.Event{Type: outbox.TypePaymentSucceeded, SubjectID: id, PaymentID: id, Payload: json.RawMessage(`{}`)})
			if err != nil {
				return err
			}
			return tx.QueryRow(ctx, `SELECT traceparent FROM outbox WHERE id = $1`, evID).Scan(&tp)
		})
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	if tp := enqueue(context.Background(), payments[0]); tp != nil {
		t.Errorf("tracing off: traceparent %q stored", *tp)
	}

	restore := tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder())))
	defer restore()
	if tp := enqueue(context.Background(), payments[1]); tp != nil {
		t.Errorf("no span in ctx: traceparent %q stored", *tp)
	}
	ctx, span := tracing.Start(context.Background(), "test")
	defer span.End()
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if tp := enqueue(ctx, payments[2]); tp == nil || *tp != want {
		t.Errorf("traceparent %v, want %s", tp, want)
	}
}
