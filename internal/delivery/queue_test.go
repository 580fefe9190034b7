package delivery_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestTwoDeliverersShareTheQueue: two deliverers (two pods) on one queue
// deliver every event, each exactly once: their claims never overlap, so
// the receiver's requests are the recorded attempts, one per delivery.
func TestTwoDeliverersShareTheQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	ep := b.endpoint(rc.URL)
	const events = 300
	ids := b.publishN(events)
	cfg := fastConfig()
	cfg.EndpointConcurrency = 4 // small claims, so both deliverers take part
	b.deliver(cfg)
	b.deliver(cfg)

	b.waitStatus(ep.ID, 100, delivery.StatusDelivered, time.Minute) // the first page
	testkit.Eventually(t, time.Minute, "every delivery made", func() bool {
		return b.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`) == events
	})
	seen := map[string]int{}
	for _, r := range rc.requests() {
		seen[r.header.Get("webhook-id")]++
	}
	require.Len(t, seen, events)
	for _, id := range ids {
		require.Equal(t, 1, seen[id], "event %s delivered once", id)
	}
	require.Equal(t, events, b.count(`SELECT sum(attempts) FROM webhook_deliveries`))
}

// TestStoppingGivesBackWhatItHolds: a deliverer that stops gives back the
// deliveries it claimed and had not started (due again at once, for any
// pod, no attempt counted), and cuts off the attempt still in flight after
// its grace, which counts as a failed attempt and is retried on the
// schedule. The endpoint answers its first delivery at once (so the pod
// holds a queue of its deliveries), and then no more.
func TestStoppingGivesBackWhatItHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hanging := make(chan struct{})
	var calls atomic.Int32
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then a client that hangs up ends r's context
		if calls.Add(1) > 1 {
			select {
			case <-hanging:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(rc.Close)
	t.Cleanup(func() { close(hanging) }) // before rc.Close waits for the handlers
	ep := b.endpoint(rc.URL)
	b.publishN(20)
	cfg := fastConfig()
	cfg.Timeout = 10 * time.Minute
	cfg.Schedule = []time.Duration{time.Hour}
	cfg.EndpointConcurrency = 1 // one attempt in flight; 16 held once the endpoint is known to be fast
	cfg.Concurrency = 32
	cfg.ShutdownGrace = 100 * time.Millisecond
	stop := b.deliver(cfg)
	testkit.Eventually(t, 30*time.Second, "the second attempt under way, fifteen more held", func() bool {
		return calls.Load() == 2 && b.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND claimed_until > now() + interval '1 minute'`) == 16
	})
	stop()

	require.Equal(t, 1, b.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM webhook_deliveries WHERE attempts = 1 AND status = 'pending'
		AND last_error = 'cut off: the pod delivering it was shutting down' AND next_attempt_at > now()`))
	require.Equal(t, 18, b.count(`SELECT count(*) FROM webhook_deliveries WHERE attempts = 0 AND next_attempt_at <= now() AND claimed_until <= now()`),
		"fifteen given back, three never claimed")
	require.Len(t, b.deliveries(ep.ID), 20)
	require.EqualValues(t, 2, calls.Load())
}

// TestRelayFansOutWhatItPublishes runs the real outbox relay with the
// fan-out and a deliverer: every PaymentSucceeded the relay publishes to
// JetStream reaches the merchant's endpoint once, with the payment as data.
func TestRelayFansOutWhatItPublishes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rc := newReceiver(t, nil)
	ep := b.endpoint(rc.URL)
	const n = 20
	payments := testdb.Attempts(t, b.db.Pool, testdb.AttemptsOpts{
		TenantID: b.tenant, Prefix: testkit.RandomID("pay_") + "_", N: n,
		Statuses: []attempts.Status{attempts.Succeeded}, Outbox: true,
	})
	natsURL := testkit.NATSURL()
	_, js := testkit.JetStream(t, natsURL)
	suffix := testkit.RandomID("")
	cfg := outbox.Config{
		NATSURL: natsURL, Stream: "PAYMENTS_D" + suffix, StreamSubjects: []string{"d" + suffix + ".payments.>"},
		SubjectPrefix: "d" + suffix + ".", PollInterval: 50 * time.Millisecond, Fanout: delivery.NewFanout(nil),
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Stream) })
	relay, err := outbox.NewRelay(b.db.Pool, cfg)
	require.NoError(t, err)
	testkit.Background(t, relay.Run)
	b.deliver(fastConfig())

	testkit.Eventually(t, time.Minute, "every event delivered", func() bool {
		return b.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`) == n
	})
	require.Zero(t, b.count(`SELECT count(*) FROM outbox WHERE published_at IS NULL`))
	got := map[string]bool{}
	for _, r := range rc.requests() {
		ev := requireVerified(t, ep.Secret, r)
		require.Equal(t, "payment.succeeded", ev["type"])
		data := ev["data"].(map[string]any)
		require.Equal(t, b.tenant, data["tenant_id"])
		require.Equal(t, "SUCCEEDED", data["status"])
		got[data["id"].(string)] = true
	}
	require.Len(t, rc.requests(), n)
	for _, p := range payments {
		require.True(t, got[p], "payment %s delivered", p)
	}
	// The body's id is the event's, as the stream has it.
	s, err := js.Stream(context.Background(), cfg.Stream)
	require.NoError(t, err)
	msg, err := s.GetMsg(context.Background(), 1)
	require.NoError(t, err)
	var env struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(msg.Data, &env))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`, env.ID))
}
