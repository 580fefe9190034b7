package reconcile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/reconcile"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

func TestSettleRefundsOrphansOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := 10 * time.Minute
	matched := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Succeeded, Age: old})
	mismatch := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Succeeded, Age: old, Amount: 700})
	declined := b.attempt(chargeDeclined, testdb.AttemptOpts{Status: attempts.Failed, Age: old})
	// The customer was charged, but our payment says FAILED: an orphan.
	failedButCharged := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Failed, Age: old})
	// Not final yet: Run resolves it with the charge; settlement leaves it.
	unresolved := b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Unknown, Age: old})
	// SUCCEEDED here, but the provider has no such charge.
	missing := b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Succeeded, Age: old, ChargeID: "ch_not_at_provider"})
	// Charges nobody here made: one succeeded, one failed, one succeeded and
	// already refunded by someone else.
	ghost := b.charge("pay_ghost1", "pm_card_visa")
	b.charge("pay_ghost2", "pm_card_declined")
	refundedGhost := b.charge("pay_ghost3", "pm_card_visa")
	_, err := b.provider.Refund(b.ctx, refundedGhost.ID, "manual_refund")
	require.NoError(t, err)
	// The webhook reported the first ghost already: settlement refunds it
	// all the same and records its own finding beside the webhook's.
	testdb.Anomaly(t, b.pool, attempts.Anomaly{
		Kind: "unknown_charge", ChargeID: ghost.ID, Source: attempts.SourceWebhook, DedupeKey: "webhook:sim:evt_ghost1",
	})

	charges := b.sim.Charges(t)
	require.Len(t, charges, 8)
	day := time.Unix(charges[0].Created, 0).UTC()
	if last := time.Unix(charges[len(charges)-1].Created, 0).UTC(); last.Day() != day.Day() {
		t.Skip("the charges straddle midnight UTC")
	}
	// The payments were created that day too.
	b.exec(`UPDATE payment_attempts SET created_at = $1`, day)

	r := b.reconciler(reconcile.Config{})
	want := reconcile.Report{
		Day:               day.Format(reconcile.DayLayout),
		ProviderCharges:   8,
		Matched:           2, // matched and declined
		OrphansRefunded:   3, // ghost, failedButCharged and (already) refundedGhost
		AmountMismatches:  1,
		MissingAtProvider: 1,
	}
	for range 2 {
		rep, err := r.Settle(b.ctx, day)
		require.NoError(t, err)
		require.Equal(t, want, rep, "settling a day again reports the same")
		require.Equal(t, int64(3), b.sim.Stats(t).Refunds, "one refund per orphan, however often settled")
	}

	refunded := map[string]bool{}
	for _, c := range b.sim.Charges(t) {
		refunded[c.Reference] = c.Refunded
	}
	require.Equal(t, map[string]bool{
		matched: false, mismatch: false, declined: false, unresolved: false,
		failedButCharged: true, "pay_ghost1": true, "pay_ghost2": false, "pay_ghost3": true,
	}, refunded)
	require.Equal(t, attempts.Unknown, b.get(unresolved).Status)

	require.Equal(t, map[string]string{"webhook:sim:evt_ghost1": ""}, b.anomalies(attempts.SourceWebhook))
	kinds := b.anomalies(attempts.SourceReconciler)
	require.Equal(t, map[string]string{
		"orphan_charge:" + ghost.ID:                     "",
		"orphan_charge:" + refundedGhost.ID:             "",
		"orphan_charge:" + b.chargeOf(failedButCharged): failedButCharged,
		"amount_mismatch:" + b.chargeOf(mismatch):       mismatch,
		"missing_at_provider:" + missing:                missing,
	}, kinds)
}

func TestSettleEmptyDayAndUnreachableProvider(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.attempt(chargeSucceeded, testdb.AttemptOpts{Status: attempts.Succeeded})
	day, err := reconcile.ParseDay("2020-02-29")
	require.NoError(t, err)
	rep, err := b.reconciler(reconcile.Config{}).Settle(b.ctx, day)
	require.NoError(t, err)
	require.Equal(t, reconcile.Report{Day: "2020-02-29"}, rep)

	down := b.newProvider(testkit.RefusedURL(t, "http"), provider.Config{})
	_, err = b.reconcilerWith(b.pool, down, testPayments, reconcile.Config{}).Settle(b.ctx, day)
	require.ErrorIs(t, err, reconcile.ErrProviderUnreachable)
}

func TestParseDay(t *testing.T) {
	t.Parallel()
	d, err := reconcile.ParseDay("2026-03-01")
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), d)
	for _, bad := range []string{"", "2026-3-1", "2026-02-30", "yesterday", "2026-03-01T00:00:00Z"} {
		_, err := reconcile.ParseDay(bad)
		require.Error(t, err, bad)
	}
}

// charge makes a charge of 500 at the simulator for reference ref under its
// derived key, with method ("" for pm_card_visa).
func (b *bundle) charge(ref, method string) provider.Charge {
	b.t.Helper()
	if method == "" {
		method = "pm_card_visa"
	}
	r := b.provider.CreateCharge(b.ctx, provider.ChargeRequest{
		Amount: 500, Currency: "USD", PaymentMethod: method, Reference: ref, IdempotencyKey: attempts.ProviderKey(ref),
	})
	require.NotNil(b.t, r.Charge, "%v", r.Err)
	return *r.Charge
}

// chargeOf is the simulator's charge under the attempt's derived key.
func (b *bundle) chargeOf(id string) string {
	b.t.Helper()
	ch, err := b.provider.ChargeByKey(b.ctx, attempts.ProviderKey(id))
	require.NoError(b.t, err)
	return ch.ID
}

// anomalies maps the dedupe key of each anomaly source recorded to its attempt id.
func (b *bundle) anomalies(source attempts.Source) map[string]string {
	b.t.Helper()
	rows, err := b.pool.Query(b.ctx, `SELECT dedupe_key, COALESCE(attempt_id, '') FROM anomalies WHERE source = $1`, string(source))
	require.NoError(b.t, err)
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var key, attempt string
		require.NoError(b.t, rows.Scan(&key, &attempt))
		out[key] = attempt
	}
	require.NoError(b.t, rows.Err())
	return out
}
