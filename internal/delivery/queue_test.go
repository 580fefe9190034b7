package delivery_test

import (
	"context"
	"encoding/json"
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
// schedule.
func TestStoppingGivesBackWhatItHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hang := newHangingServer(t)
	ep := b.endpoint(hang.URL())
	b.publishN(6)
	cfg := fastConfig()
	cfg.Timeout = 10 * time.Minute
	cfg.EndpointConcurrency = 1 // one attempt in flight, three more held (queueFactor)
	cfg.ShutdownGrace = 100 * time.Millisecond
	stop := b.deliver(cfg)
	testkit.Eventually(t, 30*time.Second, "an attempt under way", func() bool { return hang.accepted.Load() == 1 })
	require.Equal(t, 4, b.count(`SELECT count(*) FROM webhook_deliveries WHERE next_attempt_at > now() + interval '1 minute'`), "claimed")
	stop()

	require.Equal(t, 1, b.count(`SELECT count(*) FROM webhook_deliveries WHERE attempts = 1 AND status = 'pending'
		AND last_error = 'cut off: the pod delivering it was shutting down' AND next_attempt_at > now()`))
	require.Equal(t, 5, b.count(`SELECT count(*) FROM webhook_deliveries WHERE attempts = 0 AND next_attempt_at <= now()`),
		"three given back, two never claimed")
	require.Len(t, b.deliveries(ep.ID), 6)
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
