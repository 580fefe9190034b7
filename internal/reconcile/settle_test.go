package reconcile_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/providersim"
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
	manual := b.provider.CreateRefund(b.ctx, provider.RefundRequest{ChargeID: refundedGhost.ID, IdempotencyKey: "manual_refund"})
	require.Equal(t, provider.Succeeded, manual.Outcome)
	// The webhook reported the first ghost already: settlement refunds it
	// all the same and records its own finding beside the webhook's.
	testdb.Anomaly(t, b.pool, attempts.Anomaly{
		Kind: "unknown_charge", ChargeID: ghost.ID, Source: attempts.SourceWebhook, DedupeKey: "webhook:sim:evt_ghost1",
	})

	day := b.dayOf(8)

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

// TestSettleSkipsProvidersNotConfigured: a SUCCEEDED payment at a provider
// removed from PROVIDERS cannot be looked up. Settlement skips it, still
// checks the payments after it, and fails the day with
// payments.ErrProviderNotConfigured (it is not fully settled).
func TestSettleSkipsProvidersNotConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gone := b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Succeeded, Provider: "gone", ChargeID: "ch_at_gone"})
	missing := b.attempt(noCharge, testdb.AttemptOpts{Status: attempts.Succeeded, ChargeID: "ch_not_at_provider"})
	day, err := reconcile.ParseDay("2020-02-29")
	require.NoError(t, err)
	b.exec(`UPDATE payment_attempts SET created_at = $1 WHERE id = $2`, day.Add(time.Hour), gone)
	b.exec(`UPDATE payment_attempts SET created_at = $1 WHERE id = $2`, day.Add(2*time.Hour), missing)

	rep, err := b.reconciler(reconcile.Config{}).Settle(b.ctx, day)
	require.ErrorIs(t, err, payments.ErrProviderNotConfigured)
	require.Equal(t, reconcile.Report{Day: "2020-02-29", MissingAtProvider: 1}, rep, "the payment after it was checked")
	require.Equal(t, map[string]string{"missing_at_provider:" + missing: missing}, b.anomalies(attempts.SourceReconciler))
	require.Equal(t, attempts.Succeeded, b.get(gone).Status)
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

// dayOf is the UTC day of the simulator's n charges, on which the
// payments are made to have been created too (the test is skipped if the
// charges straddle midnight).
func (b *bundle) dayOf(n int) time.Time {
	b.t.Helper()
	charges := b.sim.Charges(b.t)
	require.Len(b.t, charges, n)
	day := time.Unix(charges[0].Created, 0).UTC()
	if last := time.Unix(charges[len(charges)-1].Created, 0).UTC(); last.Day() != day.Day() {
		b.t.Skip("the charges straddle midnight UTC")
	}
	b.exec(`UPDATE payment_attempts SET created_at = $1`, day)
	return day
}

// chargeOf is the simulator's charge under the attempt's derived key.
func (b *bundle) chargeOf(id string) string {
	b.t.Helper()
	ch, err := b.provider.FindCharge(b.ctx, provider.Lookup{Key: attempts.ProviderKey(id)})
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

// TestSettleABusyDayPageByPage settles a day of 50,000 charges, each the
// charge of a SUCCEEDED payment, plus five orphans: the provider is read a
// page at a time (never the whole day in one answer), every charge is
// counted once, and the orphans, and only they, are refunded.
func TestSettleABusyDayPageByPage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("50,000 charges")
	}
	b := setup(t)
	const n = 50_000
	day := time.Date(2026, 1, 15, 0, 0, 0, 0, time.UTC)
	// The payments, straight into the table (tests may): created that day.
	b.exec(`INSERT INTO payment_attempts (id, tenant_id, order_id, idempotency_key, amount, currency,
	                                      payment_method, status, provider, provider_charge_id, created_at, updated_at, amount_captured)
		SELECT 'pay_busy_' || g, $1, 'o_' || g, 'k_' || g, 500, 'USD', 'pm_card_visa', 'SUCCEEDED', 'sim',
		       'ch_busy_' || g, $2::timestamptz + (g % 86400) * interval '1 second', now(), 500
		FROM generate_series(1, $3::int) AS g`, b.tenantID, day, n)
	charges := make([]providersim.Charge, 0, n+5)
	for i := 1; i <= n; i++ {
		charges = append(charges, providersim.Charge{
			ID: fmt.Sprintf("ch_busy_%d", i), Amount: 500, Currency: "USD", Status: providersim.StatusSucceeded,
			Reference: fmt.Sprintf("pay_busy_%d", i), IdempotencyKey: attempts.ProviderKey(fmt.Sprintf("pay_busy_%d", i)),
			PaymentMethod: "pm_card_visa", Created: day.Unix() + int64(i%86400),
		})
	}
	for i := 1; i <= 5; i++ {
		charges = append(charges, providersim.Charge{
			ID: fmt.Sprintf("ch_orphan_%d", i), Amount: 100, Currency: "USD", Status: providersim.StatusSucceeded,
			Reference: fmt.Sprintf("pay_nobody_%d", i), PaymentMethod: "pm_card_visa", Created: day.Unix() + 3600,
		})
	}
	b.simImport(charges)

	// Generous timeouts: under -race the simulator takes a while per page.
	p := b.newProvider(b.sim.URL(), provider.Config{CallTimeout: 10 * time.Second, RetryBudget: 10 * time.Second, BreakerFailures: 5, BreakerCooldown: time.Second})
	timing := testPayments
	timing.CallTimeout, timing.RetryBudget, timing.LockTTL = 10*time.Second, 10*time.Second, time.Minute
	rep, err := b.reconcilerWith(b.pool, p, timing, reconcile.Config{Lease: 10 * time.Minute}).Settle(b.ctx, day)
	require.NoError(t, err)
	require.Equal(t, reconcile.Report{
		Day: "2026-01-15", ProviderCharges: n + 5, Matched: n, OrphansRefunded: 5,
	}, rep)
	require.Equal(t, int64(5), b.sim.Stats(t).Refunds)
	require.Equal(t, int64(0), b.unpaged.Load(), "the day was never asked for in one answer")
	require.Equal(t, int64((n+5+999)/1000), b.lists.Load(), "one call per page of 1,000")
}
