package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acme/paymentsvc/internal/testdb"
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
	if err != nil {
		t.Fatal(err)
	}
	first := next(t, cons)
	if applied, err := b.inbox.Handle(ctx, &unacked{first}); err != nil || !applied {
		t.Fatalf("first delivery: applied %v, err %v", applied, err)
	}
	// The crash lost the Ack. Nak stands in for the AckWait expiry, so the
	// test need not wait out a timer for the redelivery.
	if err := first.Nak(); err != nil {
		t.Fatal(err)
	}

	again := next(t, cons)
	if md, _ := again.Metadata(); md == nil || md.NumDelivered != 2 {
		t.Fatalf("second delivery metadata %+v, want NumDelivered 2", md)
	}
	applied, err := b.inbox.Handle(ctx, again)
	if err != nil || applied {
		t.Fatalf("redelivery: applied %v, err %v; want not applied", applied, err)
	}
	b.assertCounts(t, 1, 1)
	waitFor(t, func() (bool, string) { // the Ack of the redelivery settles the message
		info, err := cons.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.NumAckPending == 0 && info.NumPending == 0,
			fmt.Sprintf("ack pending %d, pending %d", info.NumAckPending, info.NumPending)
	})
}

// TestConcurrentDeliveriesApplyOnce releases ten deliveries of one event
// together: exactly one applies it.
func TestConcurrentDeliveriesApplyOnce(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t).Pool
	inbox := &Inbox{pool: pool.Pool}
	if err := inbox.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ev := Event{ID: "evt_race", Type: "PaymentSucceeded", Data: Payment{ID: "pay_1", TenantID: "ten_1", OrderID: "o1", Amount: 100, Currency: "EUR"}}

	start := make(chan struct{})
	results := make(chan bool, 10)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			<-start
			applied, err := inbox.Apply(context.Background(), ev)
			if err != nil {
				t.Error(err)
			}
			results <- applied
		})
	}
	close(start)
	wg.Wait()
	close(results)
	winners := 0
	for applied := range results {
		if applied {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d deliveries applied the event, want 1", winners)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM fulfilments`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d fulfilments (%v), want 1", n, err)
	}
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

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, b.cfg, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})

	var pool *pgxpool.Pool
	waitFor(t, func() (bool, string) {
		if pool == nil {
			p, err := pgxpool.New(context.Background(), b.cfg.DatabaseURL)
			if err != nil {
				return false, err.Error()
			}
			pool = p
			t.Cleanup(p.Close)
		}
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM processed_messages`).Scan(&n)
		return err == nil && n == 2, fmt.Sprintf("%d events processed (%v)", n, err)
	})
	cons, err := b.js.Consumer(context.Background(), b.cfg.Stream, b.cfg.Durable)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() (bool, string) { // all three deliveries handled and acked
		info, err := cons.Info(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return info.NumAckPending == 0 && info.NumPending == 0 && info.Delivered.Consumer == 3,
			fmt.Sprintf("delivered %d, ack pending %d, pending %d", info.Delivered.Consumer, info.NumAckPending, info.NumPending)
	})
	var fulfilments int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM fulfilments`).Scan(&fulfilments); err != nil || fulfilments != 2 {
		t.Errorf("%d fulfilments (%v), want 2", fulfilments, err)
	}
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
	natsURL := os.Getenv("TEST_NATS_URL")
	if natsURL == "" {
		natsURL = "nats://127.0.0.1:4222"
	}
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connect to NATS at %s: %v", natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	suffix := randomHex(6)
	cfg := config{
		NATSURL: natsURL,
		Stream:  "CONSUMER_T" + suffix,
		Subject: "c" + suffix + ".payments.succeeded",
		Durable: "fulfilment",
	}
	ctx := context.Background()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: cfg.Stream, Subjects: []string{"c" + suffix + ".payments.>"}, Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Stream) })

	tdb := testdb.New(t)
	cfg.DatabaseURL = tdb.URL
	inbox := &Inbox{pool: tdb.Pool.Pool}
	if err := inbox.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.js.Publish(ctx, b.cfg.Subject, data, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

func (b *bundle) assertCounts(t *testing.T, processed, fulfilments int) {
	t.Helper()
	var p, f int
	err := b.pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM processed_messages), (SELECT count(*) FROM fulfilments)`).Scan(&p, &f)
	if err != nil {
		t.Fatal(err)
	}
	if p != processed || f != fulfilments {
		t.Errorf("%d processed, %d fulfilments; want %d, %d", p, f, processed, fulfilments)
	}
}

func next(t *testing.T, cons jetstream.Consumer) jetstream.Msg {
	t.Helper()
	msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
	if err != nil {
		t.Fatalf("next message: %v", err)
	}
	return msg
}

// unacked is a delivery whose Ack is lost, as when the consumer crashes
// between its commit and the Ack.
type unacked struct{ jetstream.Msg }

func (unacked) Ack() error { return nil }

func waitFor(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, desc := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: %s", desc)
		}
		<-tick.C
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
