package reconcile_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/reconcile"
	"github.com/acme/paymentsvc/internal/testdb"
)

// authorize makes the simulator authorize a payment with id under its
// derived key, as the service's call would have.
func (b *bundle) authorize(id string) provider.Charge {
	b.t.Helper()
	r := b.provider.CreateCharge(b.ctx, provider.ChargeRequest{
		Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa", Reference: id, IdempotencyKey: attempts.ProviderKey(id), Manual: true,
	})
	require.Equal(b.t, provider.Succeeded, r.Outcome, "%v", r.Err)
	return *r.Charge
}

// held seeds a manual payment in status (default AUTHORIZED) whose charge
// the simulator authorized.
func (b *bundle) held(o testdb.AttemptOpts) testdb.Seeded {
	b.t.Helper()
	o.TenantID, o.ID, o.CaptureMethod = b.tenantID, attempts.NewID(), attempts.CaptureManual
	if o.Status == "" {
		o.Status = attempts.Authorized
	}
	o.ChargeID = b.authorize(o.ID).ID
	return testdb.Attempt(b.t, b.pool, o)
}

func (b *bundle) capture(id string) captures.Capture {
	b.t.Helper()
	c, err := captures.Get(b.ctx, b.pool, id)
	require.NoError(b.t, err)
	return c
}

// TestRunResolvesCapturesAndVoids: the operations job resolves unresolved
// captures and voids as it does refunds: by the provider's record under the
// derived key, FAILED provider_no_record once quiet long enough, FAILED
// abandoned for a CREATED one.
func TestRunResolvesCapturesAndVoids(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := 10 * time.Minute

	landed := b.held(testdb.AttemptOpts{})
	lost := testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: landed, Amount: ptr(int64(300)), Status: lifecycle.Unknown, Age: old})
	r := b.provider.CaptureCharge(b.ctx, provider.CaptureRequest{ChargeID: *landed.ProviderChargeID, Amount: 300, Reference: lost.ID, IdempotencyKey: captures.ProviderKey(lost.ID)})
	require.Equal(t, provider.Succeeded, r.Outcome)

	never := b.held(testdb.AttemptOpts{})
	noRecord := testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: never, Kind: captures.KindVoid, Status: lifecycle.Unknown, Age: old})
	abandonedOf := b.held(testdb.AttemptOpts{})
	abandoned := testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: abandonedOf, Age: old})
	recent := b.held(testdb.AttemptOpts{})
	young := testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: recent, Status: lifecycle.Pending})

	sum, err := b.reconciler(reconcile.Config{MinAge: time.Minute}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.OperationSummary{Checked: 2, Succeeded: 1, Failed: 1}, sum.Captures)
	require.Equal(t, reconcile.OperationSummary{Checked: 1, Failed: 1}, sum.Voids)
	require.Zero(t, sum.Checked, "no payment to check")

	require.Equal(t, lifecycle.Succeeded, b.capture(lost.ID).Status)
	require.Equal(t, attempts.Succeeded, b.get(landed.ID).Status)
	require.EqualValues(t, 300, b.get(landed.ID).AmountCaptured)
	got := b.capture(noRecord.ID)
	require.Equal(t, lifecycle.Failed, got.Status)
	require.Equal(t, attempts.FailureProviderNoRecord, *got.FailureCode)
	require.Equal(t, attempts.Authorized, b.get(never.ID).Status, "a FAILED void leaves it held")
	got = b.capture(abandoned.ID)
	require.Equal(t, lifecycle.Failed, got.Status)
	require.Equal(t, attempts.FailureAbandoned, *got.FailureCode)
	require.Equal(t, attempts.Authorized, b.get(abandonedOf.ID).Status)
	require.Equal(t, lifecycle.Pending, b.capture(young.ID).Status, "younger than --min-age")
}

// TestRunChecksExpiredAuthorizations: whatever --min-age, every AUTHORIZED
// payment past its capture_before is checked: CANCELED (expired) when the
// provider says so, SUCCEEDED when it finds a capture, left as it is while
// still held or while a capture or void of ours holds it.
func TestRunChecksExpiredAuthorizations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	past := time.Now().Add(-time.Hour)
	expired := b.held(testdb.AttemptOpts{CaptureBefore: past})
	b.sim.Expire(t, *expired.ProviderChargeID)
	stillHeld := b.held(testdb.AttemptOpts{CaptureBefore: past}) // our clock and the provider's disagree
	captured := b.held(testdb.AttemptOpts{CaptureBefore: past})
	require.Equal(t, provider.Succeeded, b.provider.CaptureCharge(b.ctx, provider.CaptureRequest{ChargeID: *captured.ProviderChargeID, IdempotencyKey: "dashboard"}).Outcome)
	busy := b.held(testdb.AttemptOpts{CaptureBefore: past})
	b.sim.Expire(t, *busy.ProviderChargeID)
	testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: busy, Status: lifecycle.Pending})
	notYet := b.held(testdb.AttemptOpts{})
	b.sim.Expire(t, *notYet.ProviderChargeID) // learnt from webhooks, syncs or a refused capture

	r := b.reconciler(reconcile.DefaultConfig())
	sum, err := r.Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Expired)
	a := b.get(expired.ID)
	require.Equal(t, attempts.Canceled, a.Status)
	require.Equal(t, lifecycle.CanceledExpired, *a.CanceledReason)
	require.Equal(t, attempts.Authorized, b.get(stillHeld.ID).Status)
	require.Equal(t, attempts.Succeeded, b.get(captured.ID).Status)
	require.Equal(t, attempts.Authorized, b.get(busy.ID).Status, "a pending capture decides it")
	require.Equal(t, attempts.Authorized, b.get(notYet.ID).Status, "capture_before has not passed")
	for _, id := range []string{expired.ID, captured.ID} {
		var reconciled int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND source = 'reconciler'`, id).Scan(&reconciled))
		require.Equal(t, 1, reconciled, "audited as the reconciler's")
	}

	// The one still held is not asked again at once (its claim's lease).
	lookups := b.sim.Stats(t)
	sum, err = r.Run(b.ctx)
	require.NoError(t, err)
	require.Zero(t, sum.Expired)
	require.Equal(t, lookups, b.sim.Stats(t))
}

// TestRunResolvesUnknownManualPayments: an UNKNOWN manual payment whose
// charge the provider holds is AUTHORIZED (counted as authorized), one it
// shows expired is CANCELED.
func TestRunResolvesUnknownManualPayments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := 10 * time.Minute
	held := b.held(testdb.AttemptOpts{Status: attempts.Unknown, Age: old})
	gone := b.held(testdb.AttemptOpts{Status: attempts.Unknown, Age: old})
	b.sim.Expire(t, b.chargeOf(gone.ID))
	sum, err := b.reconciler(reconcile.Config{MinAge: time.Minute}).Run(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, sum.Checked)
	require.Equal(t, 1, sum.Authorized)
	require.Equal(t, 1, sum.Failed, "CANCELED: no money moved")
	a := b.get(held.ID)
	require.Equal(t, attempts.Authorized, a.Status)
	require.NotNil(t, a.CaptureBefore)
	require.Equal(t, 201, b.keyResponse(held.ID), "the key holds the AUTHORIZED answer")
	require.Equal(t, attempts.Canceled, b.get(gone.ID).Status)
	require.Equal(t, 402, b.keyResponse(gone.ID))
}

// TestSettleVoidsOrphanAuthorizations: an authorized charge no payment
// stands for is voided under a key derived from it; authorized, voided and
// expired charges are never refunded; a charge that moved money whose
// payment is CANCELED is refunded as an orphan. Settling again changes
// nothing and reports the same.
func TestSettleVoidsOrphanAuthorizations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := 10 * time.Minute
	matchedHeld := b.held(testdb.AttemptOpts{Age: old})
	// A FAILED payment whose authorization the provider holds: an orphan.
	failedID := attempts.NewID()
	b.authorize(failedID)
	testdb.Attempt(t, b.pool, testdb.AttemptOpts{
		TenantID: b.tenantID, ID: failedID, Status: attempts.Failed, FailureCode: attempts.FailureProviderNoRecord, Age: old, CaptureMethod: attempts.CaptureManual,
	})
	ghost := b.authorize("pay_ghost_held")
	// CANCELED here, but the provider captured it: money moved, refunded.
	canceled := b.held(testdb.AttemptOpts{Status: attempts.Canceled, Age: old})
	require.Equal(t, provider.Succeeded, b.provider.CaptureCharge(b.ctx, provider.CaptureRequest{ChargeID: *canceled.ProviderChargeID, IdempotencyKey: "dashboard"}).Outcome)
	// CANCELED and expired at the provider too: matched, nothing to do.
	expired := b.held(testdb.AttemptOpts{Status: attempts.Canceled, Age: old})
	b.sim.Expire(t, *expired.ProviderChargeID)
	ghostExpired := b.authorize("pay_ghost_expired")
	b.sim.Expire(t, ghostExpired.ID)

	day := b.dayOf(6)
	r := b.reconciler(reconcile.Config{})
	want := reconcile.Report{
		Day: day.Format(reconcile.DayLayout), ProviderCharges: 6,
		Matched:         2, // matchedHeld and expired
		OrphansVoided:   2, // the FAILED payment's and the ghost's authorizations
		OrphansRefunded: 1, // the CANCELED payment's captured charge
	}
	for range 2 {
		rep, err := r.Settle(b.ctx, day)
		require.NoError(t, err)
		require.Equal(t, want, rep)
		st := b.sim.Stats(t)
		require.EqualValues(t, 1, st.Refunds, "only the charge that moved money is refunded")
	}
	byID := map[string]providersim.Charge{}
	for _, ch := range b.sim.Charges(t) {
		byID[ch.ID] = ch
	}
	require.Equal(t, providersim.StatusVoided, byID[ghost.ID].Status)
	require.Equal(t, reconcile.VoidKey(ghost.ID), *byID[ghost.ID].VoidKey)
	require.Equal(t, providersim.StatusVoided, byID[b.chargeOf(failedID)].Status)
	require.Equal(t, providersim.StatusAuthorized, byID[*matchedHeld.ProviderChargeID].Status, "ours, held, left alone")
	require.True(t, byID[*canceled.ProviderChargeID].Refunded)
	require.False(t, byID[ghostExpired.ID].Refunded)
	kinds := b.anomalies(attempts.SourceReconciler)
	require.Contains(t, kinds, reconcile.AnomalyOrphanAuthorization+":"+ghost.ID)
	require.Contains(t, kinds, reconcile.AnomalyOrphanCharge+":"+*canceled.ProviderChargeID)
}

// TestGCKeepsTheKeysOfWhatIsHeld: gc deletes an expired key of a CANCELED
// payment and of a final capture or void, never one of an AUTHORIZED
// payment (held: its capture is still to come) or of an unresolved capture.
func TestGCKeepsTheKeysOfWhatIsHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	held := b.held(testdb.AttemptOpts{})
	b.held(testdb.AttemptOpts{Status: attempts.Canceled})
	testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: held, Status: lifecycle.Failed})
	pendingVoid := testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: held, Kind: captures.KindVoid, Status: lifecycle.Unknown})
	b.exec(`UPDATE idempotency_keys SET expires_at = now() - interval '1 hour'`)

	rep, err := b.reconciler(reconcile.Config{}).GC(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Deleted, "the CANCELED payment's and the FAILED capture's")
	left := b.ids(`SELECT COALESCE(attempt_id, capture_id) FROM idempotency_keys ORDER BY 1`)
	want := []string{held.ID, pendingVoid.ID}
	if want[0] > want[1] {
		want[0], want[1] = want[1], want[0]
	}
	require.Equal(t, want, left)
}
