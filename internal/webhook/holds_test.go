package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// manual seeds a manual payment in status with its charge id.
func (b *bundle) manual(status attempts.Status) (testdb.Seeded, string) {
	b.t.Helper()
	chargeID := testkit.RandomID("ch_")
	return testdb.Attempt(b.t, b.pool, testdb.AttemptOpts{
		TenantID: b.tenantID, Status: status, ChargeID: chargeID, CaptureMethod: attempts.CaptureManual,
	}), chargeID
}

// heldEvent is an event about authorization chargeID of a in the
// simulator's shape.
func heldEvent(typ string, a attempts.Attempt, chargeID string) providersim.Event {
	ev := newEvent(EventChargeSucceeded, a, chargeID)
	ev.Type = typ
	ch := &ev.Data.Charge
	ch.CaptureBefore = testNow.Add(time.Hour).Unix()
	switch typ {
	case EventChargeAuthorized:
		ch.Status, ch.AmountCapturable = providersim.StatusAuthorized, a.Amount
	case EventChargeCaptured:
		ch.Captured, ch.AmountCaptured = true, 300
	case EventChargeVoided:
		ch.Status = providersim.StatusVoided
	case EventChargeExpired:
		ch.Status = providersim.StatusExpired
	}
	return ev
}

func (b *bundle) events(paymentID, typ string) int {
	return b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1 AND type = $2`, paymentID, typ)
}

func TestChargeAuthorizedAuthorizes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, chargeID := b.manual(attempts.Unknown)
	ev := heldEvent(EventChargeAuthorized, p.Attempt, chargeID)
	expectOK(t, b.deliver(ev))
	require.Equal(t, outcomeApplied, b.outcome(ev.ID))
	a := b.get(p.ID)
	require.Equal(t, attempts.Authorized, a.Status)
	require.Equal(t, testNow.Add(time.Hour).UTC(), a.CaptureBefore.UTC())
	require.Equal(t, chargeID, *a.ProviderChargeID)
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentAuthorized))

	expectOK(t, b.deliver(ev)) // the same event again
	late := heldEvent(EventChargeAuthorized, p.Attempt, chargeID)
	expectOK(t, b.deliver(late))
	require.Equal(t, outcomeNoop, b.outcome(late.ID))
	require.Equal(t, 1, b.audits(p.ID, attempts.Authorized))
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentAuthorized))

	auto, autoCharge := b.attempt(attempts.Pending)
	wrong := heldEvent(EventChargeAuthorized, auto, autoCharge)
	expectOK(t, b.deliver(wrong))
	require.Equal(t, outcomeAnomaly, b.outcome(wrong.ID), "an automatic payment is never only authorized")
	require.Equal(t, attempts.Pending, b.get(auto.ID).Status)
}

// TestChargeCapturedByUs resolves our own capture, found by its key or as
// the payment's pending capture.
func TestChargeCapturedByUs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, byKey := range []bool{true, false} {
		p, chargeID := b.manual(attempts.Authorized)
		c := testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: p, Status: lifecycle.Unknown})
		ev := heldEvent(EventChargeCaptured, p.Attempt, chargeID)
		if byKey {
			ev.Data.Charge.CaptureKey = ptr(captures.ProviderKey(c.ID))
		}
		expectOK(t, b.deliver(ev))
		require.Equal(t, outcomeApplied, b.outcome(ev.ID))
		got, err := captures.Get(context.Background(), b.pool, c.ID)
		require.NoError(t, err)
		require.Equal(t, lifecycle.Succeeded, got.Status, "by key: %v", byKey)
		a := b.get(p.ID)
		require.Equal(t, attempts.Succeeded, a.Status)
		require.EqualValues(t, 300, a.AmountCaptured, "what the provider captured")
		require.Zero(t, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1`, p.ID), "our own capture is no anomaly")
		require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentSucceeded))
	}
}

// TestHeldMovedAtTheProvider: a capture, void or expiry made at the
// provider without one of ours moves the payment all the same, and records
// an anomaly for the capture and the void.
func TestHeldMovedAtTheProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		typ     string
		status  attempts.Status
		reason  string
		anomaly string
	}{
		{EventChargeCaptured, attempts.Succeeded, "", attempts.AnomalyUnexpectedCapture},
		{EventChargeVoided, attempts.Canceled, lifecycle.CanceledAtProvider, attempts.AnomalyUnexpectedVoid},
		{EventChargeExpired, attempts.Canceled, lifecycle.CanceledExpired, ""},
	} {
		p, chargeID := b.manual(attempts.Authorized)
		ev := heldEvent(tc.typ, p.Attempt, chargeID)
		ev.Data.Charge.CaptureKey = ptr("dashboard-key") // not ours
		expectOK(t, b.deliver(ev))
		require.Equal(t, outcomeApplied, b.outcome(ev.ID), tc.typ)
		a := b.get(p.ID)
		require.Equal(t, tc.status, a.Status, tc.typ)
		if tc.reason != "" {
			require.Equal(t, tc.reason, *a.CanceledReason)
		}
		want := 0
		if tc.anomaly != "" {
			want = 1
			require.Equal(t, 1, b.anomalies(tc.anomaly, chargeID), tc.typ)
		}
		require.Equal(t, want, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1`, p.ID), tc.typ)
	}
	// A late expiry of a captured payment contradicts it.
	p, chargeID := b.manual(attempts.Authorized)
	expectOK(t, b.deliver(heldEvent(EventChargeCaptured, p.Attempt, chargeID)))
	late := heldEvent(EventChargeExpired, p.Attempt, chargeID)
	expectOK(t, b.deliver(late))
	require.Equal(t, outcomeAnomaly, b.outcome(late.ID))
	require.Equal(t, attempts.Succeeded, b.get(p.ID).Status)
}

func TestChargeVoidedByUsTakesTheVoidsReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, chargeID := b.manual(attempts.Authorized)
	reason := "duplicate"
	v := testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: p, Kind: captures.KindVoid, Reason: &reason, Status: lifecycle.Pending})
	ev := heldEvent(EventChargeVoided, p.Attempt, chargeID)
	ev.Data.Charge.VoidKey = ptr(captures.ProviderKey(v.ID))
	expectOK(t, b.deliver(ev))
	a := b.get(p.ID)
	require.Equal(t, attempts.Canceled, a.Status)
	require.Equal(t, "duplicate", *a.CanceledReason)
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentCanceled))
	require.Zero(t, b.allAnomalies())
}

func TestOrphanVoidOfSettlementIsExpected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ev := heldEvent(EventChargeVoided, attempts.Attempt{ID: "pay_orphan", Amount: 500, Currency: "USD"}, testkit.RandomID("ch_"))
	ev.Data.Charge.Reference, ev.Data.Charge.IdempotencyKey = "", "someone-elses-key"
	ev.Data.Charge.VoidKey = ptr(captures.OrphanVoidKey(ev.Data.Charge.ID))
	expectOK(t, b.deliver(ev))
	require.Equal(t, outcomeNoop, b.outcome(ev.ID))
	require.Zero(t, b.allAnomalies())
}

func ptr[T any](v T) *T { return &v }

// A capture that stayed UNKNOWN for days and is resolved by a webhook keeps
// its key a whole IDEMPOTENCY_KEY_TTL from the resolution (§19), as a
// payment's does (TestResolvedPaymentKeepsItsKeyForTheTTL).
func TestResolvedCaptureKeepsItsKeyForTheTTL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, chargeID := b.manual(attempts.Authorized)
	c := testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: p, Status: lifecycle.Unknown})
	_, err := b.pool.Exec(context.Background(), `UPDATE idempotency_keys
		SET created_at = created_at - interval '3 days', expires_at = now() - interval '1 day' WHERE capture_id = $1`, c.ID)
	require.NoError(t, err)
	ev := heldEvent(EventChargeCaptured, p.Attempt, chargeID)
	ev.Data.Charge.CaptureKey = ptr(captures.ProviderKey(c.ID))
	expectOK(t, b.deliver(ev))
	got, err := captures.Get(context.Background(), b.pool, c.ID)
	require.NoError(t, err)
	require.Equal(t, lifecycle.Succeeded, got.Status)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM idempotency_keys AS k JOIN captures AS c ON c.id = k.capture_id
		WHERE k.capture_id = $1 AND k.expires_at = c.updated_at + $2 * interval '1 millisecond'`,
		c.ID, idempotency.DefaultKeyTTL.Milliseconds()), "the key expires a TTL after the resolution")
	deleted, err := idempotency.DeleteExpired(context.Background(), b.pool, 100)
	require.NoError(t, err)
	require.Zero(t, deleted, "gc keeps the key")
}
