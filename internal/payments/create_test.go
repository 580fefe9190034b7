package payments_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// report moves attempt id to c.To as a webhook would (attempts.Transition
// with source webhook, in its own transaction), requiring that it applied.
func (b *bundle) report(id string, c attempts.Change) {
	b.t.Helper()
	c.ID, c.Source, c.Reason = id, attempts.SourceWebhook, "charge report"
	err := db.WithTx(b.ctx, b.pool, func(tx pgx.Tx) error {
		_, applied, err := attempts.Transition(b.ctx, tx, c)
		if err == nil && !applied {
			err = fmt.Errorf("the report to %s was not applied", c.To)
		}
		return err
	})
	require.NoError(b.t, err)
}

// A payment whose answer was lost (UNKNOWN, its key released) is made final
// by the provider's webhook. The client's retry with the same key takes the
// key over, finds the attempt final, and answers and stores it without
// calling the provider or changing the attempt; later retries replay it.
func TestResumeAttemptMadeFinalByWebhook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		report attempts.Change
		code   int
	}{
		{attempts.Change{To: attempts.Succeeded, ChargeID: "ch_from_webhook"}, http.StatusCreated},
		{attempts.Change{To: attempts.Failed, ChargeID: "ch_from_webhook", FailureCode: "insufficient_funds"}, http.StatusPaymentRequired},
	} {
		t.Run(string(tc.report.To), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			in := b.input("key-resume", "order-resume")
			a := testdb.Attempt(t, b.pool, testdb.AttemptOpts{
				TenantID: b.tenantID, Key: in.IdempotencyKey, OrderID: in.OrderID, Status: attempts.Unknown,
			})
			b.report(a.ID, tc.report)
			before := b.history(a.ID)

			r, err := b.svc.Create(b.ctx, in)
			require.NoError(t, err)
			require.Equal(t, tc.code, r.Code, "%s", r.Body)
			require.False(t, r.Replayed, "resumed, not replayed: nothing was stored before")
			require.Equal(t, a.ID, r.PaymentID)
			p := payment(t, r)
			require.Equal(t, tc.report.To, p.Status)
			require.Equal(t, "ch_from_webhook", *p.ProviderChargeID)

			require.Equal(t, providersim.Stats{}, b.sim.Stats(t), "nothing is called for a final attempt")
			require.Equal(t, before, b.history(a.ID), "no transition")
			require.Zero(t, b.count(`SELECT count(*) FROM anomalies`), "the webhook and the attempt agree")
			k := b.key(in.IdempotencyKey)
			require.False(t, k.locked)
			require.NotNil(t, k.code)
			require.EqualValues(t, tc.code, *k.code)
			require.JSONEq(t, string(r.Body), string(k.body))

			again, err := b.svc.Create(b.ctx, in)
			require.NoError(t, err)
			require.True(t, again.Replayed)
			require.Equal(t, tc.code, again.Code)
			require.JSONEq(t, string(r.Body), string(again.Body))
		})
	}
}

// The provider charged, but while the request was on its way back a report
// made the attempt final otherwise: FAILED, or SUCCEEDED with another
// charge. The completing transaction applies nothing, records one
// conflicting_report anomaly for a human, and answers (and stores) the
// attempt as it is: the first report to commit wins, the second is kept
// as evidence.
func TestConflictingReportOnFinalAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		report attempts.Change
		code   int
		outbox int
	}{
		{"failed meanwhile", attempts.Change{To: attempts.Failed, FailureCode: "card_declined"}, http.StatusPaymentRequired, 1},
		{"succeeded with another charge", attempts.Change{To: attempts.Succeeded, ChargeID: "ch_other"}, http.StatusCreated, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			in := b.input("key-conflict", "order-conflict")
			st := newStall(t)
			b.prov.afterCall.Store(st)
			done := b.createAsync(b.svc, in)
			st.awaitReached(t)
			charges := b.sim.Charges(t)
			require.Len(t, charges, 1)
			require.Equal(t, providersim.StatusSucceeded, charges[0].Status)
			id := b.only(in.OrderID).ID
			b.report(id, tc.report)
			st.release()

			res := awaitResult(t, done)
			require.NoError(t, res.err)
			require.Equal(t, tc.code, res.reply.Code, "%s", res.reply.Body)
			p := payment(t, res.reply)
			require.Equal(t, tc.report.To, p.Status, "the answer is the attempt as committed")
			require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, tc.report.To}, b.history(id),
				"the provider's answer applied nothing")
			require.Equal(t, 1, b.count(`SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND source = 'webhook'`, id))
			require.Equal(t, tc.outbox, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, id))
			require.Equal(t, 1, b.count(`SELECT count(*) FROM anomalies
				WHERE kind = 'conflicting_report' AND attempt_id = $1 AND charge_id = $2 AND source = 'api'
				  AND dedupe_key = $3 AND detail->>'status' = $4 AND detail->>'reported' = 'SUCCEEDED'`,
				id, charges[0].ID, "conflict:api:"+id+":SUCCEEDED:"+charges[0].ID, string(tc.report.To)))
			require.Equal(t, 1, b.count(`SELECT count(*) FROM anomalies`))
			k := b.key(in.IdempotencyKey)
			require.NotNil(t, k.code)
			require.EqualValues(t, tc.code, *k.code)
			require.JSONEq(t, string(res.reply.Body), string(k.body))
		})
	}
}

// Twenty requests for one order under twenty keys, released together: the
// order guard lets exactly one create its payment and pay; every other is
// refused with order_already_has_payment naming that payment, and leaves no
// key and no attempt behind.
func TestOrderGuardUnderConcurrentDifferentKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 20
	replies := make([]result, n)
	testkit.Together(n, func(i int) {
		r, err := b.svc.Create(context.Background(), b.input(fmt.Sprintf("key-%d", i), "order-guarded"))
		replies[i] = result{r, err}
	})

	var winners []payments.Reply
	refused := 0
	for i, r := range replies {
		if r.err == nil {
			winners = append(winners, r.reply)
			continue
		}
		e := requireAppErr(t, r.err, apperr.OrderAlreadyHasPay)
		require.NotEmpty(t, e.PaymentID, "request %d", i)
		refused++
	}
	require.Len(t, winners, 1, "requests that created the payment")
	require.Equal(t, n-1, refused)
	w := winners[0]
	require.Equal(t, http.StatusCreated, w.Code, "%s", w.Body)
	for _, r := range replies {
		if r.err != nil {
			require.Equal(t, w.PaymentID, apperr.As(r.err).PaymentID, "the refusal names the order's payment")
		}
	}
	require.Equal(t, w.PaymentID, b.only("order-guarded").ID)
	require.Equal(t, 1, b.count(`SELECT count(*) FROM idempotency_keys`), "the refused keys were rolled back")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM payment_attempt_events WHERE to_status = 'CREATED'`))
	require.Equal(t, providersim.Stats{ChargeCalls: 1, Charges: 1}, b.sim.Stats(t))
}

// tripBreaker opens p's breaker with one failed charge call (the provider
// answering 503), for a breaker that opens on one failure.
func (b *bundle) tripBreaker(p *gatedProvider) {
	b.t.Helper()
	b.sim.SetFaults(b.t, providersim.Faults{ErrorRate: 1, ErrorStatus: http.StatusServiceUnavailable})
	r := p.Resilient.CreateCharge(b.ctx, provider.ChargeRequest{
		Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa", Reference: "pay_trip", IdempotencyKey: "trip",
	})
	require.Equal(b.t, provider.Unknown, r.Outcome)
	b.sim.ClearFaults(b.t)
	require.True(b.t, p.BreakerOpen(), "the breaker is open")
}

// requireUnavailable checks the not-sent answer: 503 provider_unavailable
// with the breaker's cooldown as Retry-After, the key released without a
// response (so the same key resumes the attempt), and the attempt in status.
func (b *bundle) requireUnavailable(err error, in payments.CreateInput, status attempts.Status) attempts.Attempt {
	b.t.Helper()
	e := requireAppErr(b.t, err, apperr.ProviderUnavailable)
	require.Equal(b.t, int(timings.BreakerCooldown.Seconds()), e.RetryAfter, "Retry-After is the breaker's cooldown")
	k := b.key(in.IdempotencyKey)
	require.False(b.t, k.locked, "the key is released")
	require.Nil(b.t, k.code, "nothing is stored")
	a := b.only(in.OrderID)
	require.Equal(b.t, status, a.Status)
	return a
}

// The not-sent path: with the breaker open, nothing is sent and nothing
// charged; the answer is 503 provider_unavailable with the key released.
// Open before the service's check, a new key is refused before PENDING:
// the attempt stays CREATED. Open between the check and the call (the
// check told it is closed), PENDING is committed, the call refused, and the
// attempt goes back to CREATED (not_sent). Either way the same key on a pod
// whose breaker is closed resumes the attempt and pays once.
func TestBreakerOpenSendsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		checkLies  bool
		leftIn     attempts.Status
		leftBehind []attempts.Status
	}{
		{"before the check", false, attempts.Created, []attempts.Status{attempts.Created}},
		{"at the call", true, attempts.Created, []attempts.Status{attempts.Created, attempts.Pending, attempts.Created}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pc := providerConfig
			pc.BreakerFailures = 1
			b := setupWith(t, timings, pc)
			b.tripBreaker(b.prov)
			b.prov.breakerLooksShut.Store(tc.checkLies)
			calls := b.sim.Stats(t).ChargeCalls

			in := b.input("key-refused", "order-refused")
			_, err := b.svc.Create(b.ctx, in)
			a := b.requireUnavailable(err, in, tc.leftIn)
			require.Equal(t, tc.leftBehind, b.history(a.ID))
			require.Equal(t, providersim.Stats{ChargeCalls: calls}, b.sim.Stats(t), "no call, no charge")

			pod, _ := b.otherPod()
			r, err := pod.Create(b.ctx, in)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
			require.Equal(t, a.ID, r.PaymentID, "the same key resumed the attempt")
			require.Equal(t, append(tc.leftBehind, attempts.Pending, attempts.Succeeded), b.history(a.ID))
			require.Equal(t, providersim.Stats{ChargeCalls: calls + 1, Charges: 1}, b.sim.Stats(t))
		})
	}
}
