//go:build ha

package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/providersim"
)

// allowedFailures are the answers a checkout may get while the database
// fails over; it retries every one of them with the same key: the 503 of a
// database that cannot be reached, and the 409 of a key whose owner lost its
// connection (the lock expires after its TTL).
var allowedFailures = []string{
	"503 database_unavailable",
	"409 idempotency_key_in_use",
	"timeout",
	"transport",
}

// checkAnswers fails t for a failed try of a kind a checkout must not see.
func checkAnswers(t *testing.T, o outage) {
	t.Helper()
	for kind := range o.failed {
		require.Contains(t, allowedFailures, kind, "a checkout got %q during the scenario", kind)
	}
}

// dbAttempt is a payment as the database has it.
type dbAttempt struct {
	order, status string
	chargeID      *string
}

// checkInvariants checks the promise over every payment so far:
// every payment answered 201 is SUCCEEDED with the charge it was answered
// with; no order has more than one payment or more than one succeeded
// charge; every key is settled (response stored, unlocked); and every
// SUCCEEDED payment has exactly one PaymentSucceeded in the stream, which
// holds nothing else.
func (h *harness) checkInvariants(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The database.
	got := map[string]dbAttempt{}
	perOrder := map[string]int{}
	rows, err := h.pool.Query(ctx, "SELECT id, order_id, status, provider_charge_id FROM payment_attempts WHERE tenant_id = $1", h.tenant.ID)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var a dbAttempt
		require.NoError(t, rows.Scan(&id, &a.order, &a.status, &a.chargeID))
		got[id] = a
		perOrder[a.order]++
	}
	require.NoError(t, rows.Err())
	for _, p := range h.paid {
		a, ok := got[p.id]
		require.True(t, ok, "payment %s (order %s) was answered 201 and is not in the database", p.id, p.order)
		require.Equal(t, "SUCCEEDED", a.status, "payment %s (order %s) was answered 201", p.id, p.order)
		require.Equal(t, p.order, a.order, "payment %s", p.id)
		require.NotNil(t, a.chargeID, "payment %s", p.id)
		require.Equal(t, p.chargeID, *a.chargeID, "payment %s: charge answered vs stored", p.id)
		require.Equal(t, 1, perOrder[p.order], "payments of order %s", p.order)
	}
	// Every payment in the database is one a checkout was paid for: each
	// intent's retries found the key, whether or not the COMMIT that
	// created it had answered.
	require.Len(t, got, len(h.paid), "payments in the database vs payments answered 201")

	// The provider: exactly one succeeded charge per payment, per order.
	succeeded := map[string][]string{}
	for _, c := range h.sim.Charges(t) {
		a, known := got[c.Reference]
		require.True(t, known, "charge %s has reference %q, no payment of ours", c.ID, c.Reference)
		if c.Status == providersim.StatusSucceeded {
			succeeded[a.order] = append(succeeded[a.order], c.ID)
		}
	}
	for id, a := range got {
		require.Len(t, succeeded[a.order], 1, "succeeded charges of order %s (payment %s)", a.order, id)
		require.Equal(t, *a.chargeID, succeeded[a.order][0], "payment %s", id)
	}

	// Keys: none locked past its TTL; every key settled with its response.
	var n int
	require.NoError(t, h.pool.QueryRow(ctx,
		"SELECT count(*) FROM idempotency_keys WHERE locked_until > now() + $1::interval", lockTTL.String()).Scan(&n))
	require.Zero(t, n, "keys locked beyond the lock TTL")
	require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys
		WHERE tenant_id = $1 AND (response_code IS NULL OR locked_until IS NOT NULL)`, h.tenant.ID).Scan(&n))
	require.Zero(t, n, "keys without their stored response, or still locked, after every checkout was paid")

	h.checkEvents(t, got)

	// The reconciler finds the primary, wherever it is now, and nothing to
	// resolve: every payment was resolved by its own checkout.
	out, code := h.reconciler(t, "run", "--min-age", "0s")
	require.Equal(t, 0, code, "reconciler run")
	var sum struct{ Checked int }
	require.NoError(t, json.Unmarshal([]byte(out), &sum), "reconciler run printed %q", out)
	require.Zero(t, sum.Checked, "payments the reconciler had to resolve: %s", out)
}

// streamEvent is one message of the stream.
type streamEvent struct {
	msgID, id, typ, paymentID string
	stored                    time.Time
}

// checkEvents waits until the outbox is drained and then requires the
// stream to hold each outbox event exactly once, and nothing else.
func (h *harness) checkEvents(t *testing.T, got map[string]dbAttempt) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor(t, 90*time.Second, "the outbox is drained", func() bool {
		var pending int
		err := h.pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE published_at IS NULL").Scan(&pending)
		return err == nil && pending == 0
	})
	outbox := map[string]string{} // event id → payment id
	perPayment := map[string]int{}
	rows, err := h.pool.Query(ctx, "SELECT id, payment_id FROM outbox WHERE type = 'PaymentSucceeded'")
	require.NoError(t, err)
	for rows.Next() {
		var id, pay string
		require.NoError(t, rows.Scan(&id, &pay))
		outbox[id] = pay
		perPayment[pay]++
	}
	require.NoError(t, rows.Err())
	for id, a := range got {
		if a.status == "SUCCEEDED" {
			require.Equal(t, 1, perPayment[id], "PaymentSucceeded outbox rows of %s", id)
		}
	}

	events := h.readStream(t)
	seen := map[string]int{}
	for _, e := range events {
		require.Equal(t, e.msgID, e.id, "Nats-Msg-Id vs CloudEvents id")
		require.Equal(t, "PaymentSucceeded", e.typ, "event %s", e.id)
		pay, ok := outbox[e.id]
		require.True(t, ok, "event %s in the stream is no outbox row", e.id)
		require.Equal(t, pay, e.paymentID, "event %s", e.id)
		seen[e.id]++
	}
	for id, pay := range outbox {
		require.Equal(t, 1, seen[id], "copies in the stream of event %s (payment %s)", id, pay)
	}
	require.Len(t, events, len(outbox), "events in the stream vs outbox rows")
}

// readStream reads every message of the stream with an ordered consumer.
func (h *harness) readStream(t *testing.T) []streamEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := h.js.Stream(ctx, streamName)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	last := info.State.LastSeq
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var out []streamEvent
	var seq uint64
	for seq < last {
		require.NoError(t, ctx.Err(), "reading the stream: at %d of %d", seq, last)
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			md, err := m.Metadata()
			require.NoError(t, err)
			seq = md.Sequence.Stream
			var env struct {
				ID      string `json:"id"`
				Type    string `json:"type"`
				Subject string `json:"subject"`
			}
			require.NoError(t, json.Unmarshal(m.Data(), &env), "message %d", seq)
			out = append(out, streamEvent{
				msgID: m.Headers().Get("Nats-Msg-Id"), id: env.ID, typ: env.Type, paymentID: env.Subject, stored: md.Timestamp,
			})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
			require.NoError(t, err)
		}
	}
	return out
}

// eventDelay is the longest time from the start of a transaction that wrote
// a PaymentSucceeded (the outbox row's created_at) after since to its
// message in the stream. A transaction whose COMMIT failed with the primary
// but was durable on the standby counts from before the failover.
func (h *harness) eventDelay(t *testing.T, since time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created := map[string]time.Time{}
	rows, err := h.pool.Query(ctx, "SELECT id, created_at FROM outbox WHERE created_at >= $1", since)
	require.NoError(t, err)
	for rows.Next() {
		var id string
		var at time.Time
		require.NoError(t, rows.Scan(&id, &at))
		created[id] = at
	}
	require.NoError(t, rows.Err())
	var worst time.Duration
	for _, e := range h.readStream(t) {
		if at, ok := created[e.id]; ok {
			worst = max(worst, e.stored.Sub(at))
		}
	}
	return worst
}

// checkListeners requires every pod's outbox relay to LISTEN on the
// current primary again (so new events wake it rather than wait for a poll)
// and returns when the last relay logged that its LISTEN connection was
// restored after since (zero if none had to).
func (h *harness) checkListeners(t *testing.T, since time.Time) time.Time {
	t.Helper()
	n := -1
	defer func() {
		if t.Failed() {
			t.Logf("LISTEN outbox sessions on the primary at the last look: %d", n)
		}
	}()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d LISTEN outbox sessions on the primary", len(h.pods)), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := h.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND backend_type = 'client backend' AND application_name = $1`,
			db.ListenerApplicationName("outbox")).Scan(&n)
		return err == nil && n == len(h.pods)
	})
	var last time.Time
	for _, p := range h.pods {
		for _, line := range strings.Split(p.Logs(), "\n") {
			var rec struct {
				Time time.Time `json:"time"`
				Msg  string    `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "outbox LISTEN connection restored" && rec.Time.After(since) {
				last = maxTime(last, rec.Time)
			}
		}
	}
	return last
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// waitFor polls cond until it holds or fails t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
