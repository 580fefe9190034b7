package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestRedeliveredEventAppliedOnce processes an event, "crashes" before the
// Ack, and handles the redelivery JetStream then makes: the effect exists once.
func TestRedeliveredEventAppliedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.publish(t, "evt_1", "evt_1")

	cons, err := b.js.CreateOrUpdateConsumer(ctx, b.cfg.Stream, jetstream.ConsumerConfig{
		Durable: "fulfilment", FilterSubject: b.cfg.Subject, AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute,
	})
	require.NoError(t, err)
	first := next(t, cons)
	applied, err := b.inbox.Handle(ctx, &unacked{first})
	require.NoError(t, err, "first delivery")
	require.True(t, applied, "first delivery")
	// The crash lost the Ack. Nak stands in for the AckWait expiry, so the
	// test need not wait out a timer for the redelivery.
	require.NoError(t, first.Nak())

	again := next(t, cons)
	md, err := again.Metadata()
	require.NoError(t, err)
	require.EqualValues(t, 2, md.NumDelivered, "second delivery")
	applied, err = b.inbox.Handle(ctx, again)
	require.NoError(t, err, "redelivery")
	require.False(t, applied, "redelivery")
	b.requireCounts(t, 1, 1)
	// The Ack of the redelivery settles the message.
	testkit.Eventually(t, 30*time.Second, "no message pending or awaiting its ack", func() bool {
		info, err := cons.Info(ctx)
		require.NoError(t, err)
		return info.NumAckPending == 0 && info.NumPending == 0
	})
}

// TestConcurrentDeliveriesApplyOnce releases ten deliveries of one event
// together: exactly one applies it.
func TestConcurrentDeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t).Pool
	inbox := &Inbox{pool: pool.Pool}
	require.NoError(t, inbox.Migrate(context.Background()))
	ev := Event{ID: "evt_race", Type: "PaymentSucceeded", Data: Payment{ID: "pay_1", TenantID: "ten_1", OrderID: "o1", Amount: 100, Currency: "EUR"}}

	const deliveries = 10
	applied := make([]bool, deliveries)
	errs := make([]error, deliveries)
	testkit.Together(deliveries, func(i int) {
		applied[i], errs[i] = inbox.Apply(context.Background(), ev)
	})
	winners := 0
	for i := range deliveries {
		require.NoError(t, errs[i], "delivery %d", i)
		if applied[i] {
			winners++
		}
	}
	require.Equal(t, 1, winners, "deliveries that applied the event")
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM fulfilments`).Scan(&n))
	require.Equal(t, 1, n, "fulfilments")
}

// TestRunConsumesStream runs the whole program against a database it must
// create: a republished event (a new Nats-Msg-Id, so JetStream keeps both
// copies, as after the duplicate window) is applied once.
func TestRunConsumesStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.cfg.DatabaseURL = testdb.NewEmpty(t)
	b.publish(t, "evt_a", "evt_a")
	b.publish(t, "evt_b", "evt_b")
	b.publish(t, "evt_a", "evt_a-republished")

	testkit.Background(t, func(ctx context.Context) error { return run(ctx, b.cfg, slog.New(slog.DiscardHandler)) })

	// run creates the database: poll until it is there and has the events.
	var pool *pgxpool.Pool
	testkit.Eventually(t, 30*time.Second, "two events processed", func() bool {
		if pool == nil {
			p, err := pgxpool.New(context.Background(), b.cfg.DatabaseURL)
			if err != nil {
				return false
			}
			pool = p
			t.Cleanup(p.Close)
		}
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM processed_messages`).Scan(&n)
		return err == nil && n == 2 // an error: the tables are not there yet
	})
	cons, err := b.js.Consumer(context.Background(), b.cfg.Stream, b.cfg.Durable)
	require.NoError(t, err)
	testkit.Eventually(t, 30*time.Second, "all three deliveries handled and acked", func() bool {
		info, err := cons.Info(context.Background())
		require.NoError(t, err)
		return info.NumAckPending == 0 && info.NumPending == 0 && info.Delivered.Consumer == 3
	})
	var fulfilments int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM fulfilments`).Scan(&fulfilments))
	require.Equal(t, 2, fulfilments)
}

// bundle is one test's database, inbox and JetStream stream.
type bundle struct {
	cfg   config
	inbox *Inbox
	pool  *pgxpool.Pool
	js    jetstream.JetStream
}

// setup gives t a migrated inbox and a stream of its own on the machine's
// NATS server, failing (never skipping) when either is unreachable.
func setup(t *testing.T) *bundle {
	t.Helper()
	natsURL := testkit.NATSURL()
	_, js := testkit.JetStream(t, natsURL)
	suffix := testkit.RandomID("")
	cfg := config{
		NATSURL: natsURL,
		Stream:  "CONSUMER_T" + suffix,
		Subject: "c" + suffix + ".payments.succeeded",
		Durable: "fulfilment",
	}
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: cfg.Stream, Subjects: []string{"c" + suffix + ".payments.>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Stream) })

	tdb := testdb.New(t)
	cfg.DatabaseURL = tdb.URL
	inbox := &Inbox{pool: tdb.Pool.Pool}
	require.NoError(t, inbox.Migrate(ctx))
	return &bundle{cfg: cfg, inbox: inbox, pool: tdb.Pool.Pool, js: js}
}

// publish sends event id as the payments service would, under msgID.
func (b *bundle) publish(t *testing.T, id, msgID string) {
	t.Helper()
	data, err := json.Marshal(map[string]any{
		"specversion": "1.0", "id": id, "source": "paymentsvc", "type": "PaymentSucceeded",
		"time": time.Now().UTC().Format(time.RFC3339Nano), "datacontenttype": "application/json", "subject": "pay_" + id,
		"data": map[string]any{"id": "pay_" + id, "tenant_id": "ten_1", "order_id": "ord_" + id, "amount": 1200, "currency": "EUR", "status": "SUCCEEDED"},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = b.js.Publish(ctx, b.cfg.Subject, data, jetstream.WithMsgID(msgID))
	require.NoError(t, err, "publish %s", id)
}

func (b *bundle) requireCounts(t *testing.T, processed, fulfilments int) {
	t.Helper()
	var p, f int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM processed_messages), (SELECT count(*) FROM fulfilments)`).Scan(&p, &f))
	require.Equal(t, processed, p, "processed messages")
	require.Equal(t, fulfilments, f, "fulfilments")
}

func next(t *testing.T, cons jetstream.Consumer) jetstream.Msg {
	t.Helper()
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	require.NoError(t, err, "next message")
	return msg
}

// unacked is a delivery whose Ack is lost, as when the consumer crashes
// between its commit and the Ack.
type unacked struct{ jetstream.Msg }

func (unacked) Ack() error { return nil }
