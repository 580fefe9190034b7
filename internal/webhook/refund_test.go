package webhook

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/refunds"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// refundEvent is the simulator's refund.succeeded about a refund of amount of
// chargeID made under key, with no reference (as settlement's refunds of
// orphan charges, and refunds made outside this service, carry none).
func refundEvent(chargeID, key string, amount int64) providersim.Event {
	ev := providersim.Event{ID: testkit.RandomID("evt_"), Type: EventRefundSucceeded, Created: testNow.Unix()}
	ev.Data.Refund = &providersim.Refund{
		ID: testkit.RandomID("re_"), Charge: chargeID, Amount: amount, Currency: "USD",
		Status: providersim.StatusSucceeded, IdempotencyKey: key, Created: testNow.Unix(),
	}
	return ev
}

// TestUnexpectedRefundUnderAnOrphanLookingKey: only settlement's own refund
// of an orphan charge, made under refunds.OrphanKey of that very charge, is
// expected (internal/webhook/doc.go). A provider refund of
// our SUCCEEDED payment's charge made outside this service under any other
// key that merely starts like one ("refund_…", a common name for a key) is
// unexpected: it records unexpected_refund, once, and changes nothing.
func TestUnexpectedRefundUnderAnOrphanLookingKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("settlement's own refund of an orphan charge", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		chargeID := testkit.RandomID("ch_")
		ev := refundEvent(chargeID, refunds.OrphanKey(chargeID), 500)
		expectOK(t, b.deliver(ev))
		require.Equal(t, outcomeNoop, b.outcome(ev.ID), "outcome")
		require.Zero(t, b.anomalies(anomalyUnexpectedRefund, chargeID), "unexpected_refund anomalies")
	})
	t.Run("a refund of our payment's charge under another refund_ key", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		a, chargeID := b.attempt(attempts.Succeeded)
		ev := refundEvent(chargeID, "refund_order-42", 100)
		expectOK(t, b.deliver(ev))
		require.Equal(t, outcomeUnknownRefund, b.outcome(ev.ID), "outcome")
		require.EqualValues(t, 1, b.anomalies(anomalyUnexpectedRefund, chargeID), "unexpected_refund anomalies")
		expectOK(t, b.deliver(ev))
		require.EqualValues(t, 1, b.anomalies(anomalyUnexpectedRefund, chargeID), "unexpected_refund anomalies after redelivery")
		got := b.get(a.ID)
		require.Equal(t, attempts.Succeeded, got.Status)
		require.Zero(t, got.AmountRefunded, "no refund of ours moved")
	})
	t.Run("another charge's orphan key", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		_, chargeID := b.attempt(attempts.Succeeded)
		ev := refundEvent(chargeID, refunds.OrphanKey(testkit.RandomID("ch_")), 100)
		expectOK(t, b.deliver(ev))
		require.Equal(t, outcomeUnknownRefund, b.outcome(ev.ID), "outcome")
		require.EqualValues(t, 1, b.anomalies(anomalyUnexpectedRefund, chargeID), "unexpected_refund anomalies")
	})
}

// A provider that does not echo our reference still echoes the key we
// derived from the payment (or refund) id, which names it as well.
func TestChargeFoundByItsDerivedKeyWithoutAReference(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Pending}).Attempt
	chargeID := testkit.RandomID("ch_")
	ev := newEvent(EventChargeSucceeded, a, chargeID)
	ev.Data.Charge.Reference = ""
	expectOK(t, b.deliver(ev))
	require.Equal(t, outcomeApplied, b.outcome(ev.ID), "outcome")
	got := b.get(a.ID)
	require.Equal(t, attempts.Succeeded, got.Status)
	require.Equal(t, chargeID, *got.ProviderChargeID)

	// A key that is not one of ours names nothing.
	other := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Pending}).Attempt
	ev = newEvent(EventChargeSucceeded, other, testkit.RandomID("ch_"))
	ev.Data.Charge.Reference, ev.Data.Charge.IdempotencyKey = "", "checkout-"+other.ID
	expectOK(t, b.deliver(ev))
	require.Equal(t, outcomeUnknownCharge, b.outcome(ev.ID), "outcome")
	require.Equal(t, attempts.Pending, b.get(other.ID).Status)
}

func TestIDOfProviderKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, "pay_abc", attempts.IDOfProviderKey(attempts.ProviderKey("pay_abc")))
	require.Equal(t, "rfd_abc", refunds.IDOfProviderKey(refunds.ProviderKey("rfd_abc")))
	for _, key := range []string{"", "psvc_", "psvc_pay_", "pay_abc", "psvc_rfd_abc", "x_psvc_pay_abc"} {
		require.Empty(t, attempts.IDOfProviderKey(key), key)
	}
	for _, key := range []string{"", "psvc_rfd_", "psvc_pay_abc", "refund_ch_1"} {
		require.Empty(t, refunds.IDOfProviderKey(key), key)
	}
}
