package payments_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/provider"
)

// notSentAfter is a provider whose charge call runs during (with the
// request's payment id) and then answers that nothing was sent.
type notSentAfter struct {
	*gatedProvider
	during func(paymentID string)
}

func (p notSentAfter) CreateCharge(_ context.Context, req provider.ChargeRequest) provider.Result {
	p.during(req.Reference)
	return provider.Result{Outcome: provider.NotSent, Err: provider.ErrUnavailable}
}

// A request whose call was not sent, and whose key was taken over while it
// was calling (its lock expired; here the reconciler's takeover), cannot
// take the payment back to CREATED: it answers the payment as committed
// (202 PENDING), writes nothing, and leaves the key to its new owner.
func TestNotSentAfterLosingTheKeyAnswersThePayment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.input("key-notsent-lost", "order-notsent-lost")
	var token int64
	svc := b.service(notSentAfter{gatedProvider: b.prov, during: func(id string) {
		_, err := b.pool.Exec(b.ctx, `UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE attempt_id = $1`, id)
		require.NoError(t, err)
		lock, ok, err := idempotency.TakeOverForAttempt(b.ctx, b.pool, idempotency.Config{LockTTL: timings.LockTTL, KeyTTL: timings.KeyTTL}, id)
		require.NoError(t, err)
		require.True(t, ok, "the key is taken over")
		token = lock.Token
	}}, timings)

	r, err := svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.Code, "%s", r.Body)
	id := b.only(in.OrderID).ID
	require.Equal(t, id, r.PaymentID)
	require.Equal(t, attempts.Pending, payment(t, r).Status)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending}, b.history(id), "nothing moved without the key")
	k := b.key(in.IdempotencyKey)
	require.True(t, k.locked, "the new owner holds the key")
	require.Equal(t, token, k.token)
	require.Nil(t, k.code)
}

// A report (a webhook) makes the payment final while its call is in flight,
// and the call then comes back as not sent. The payment is not taken back to
// CREATED (no edge leaves a final status): the request answers the payment
// as committed and stores that answer on the key, as finish does for a
// payment a webhook resolved first.
func TestNotSentAfterAWebhookResolvedThePaymentAnswersIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.input("key-notsent-webhook", "order-notsent-webhook")
	svc := b.service(notSentAfter{gatedProvider: b.prov, during: func(id string) {
		b.report(id, attempts.Change{To: attempts.Succeeded, ChargeID: "ch_from_webhook"})
	}}, timings)

	r, err := svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	id := b.only(in.OrderID).ID
	require.Equal(t, id, r.PaymentID)
	require.Equal(t, attempts.Succeeded, payment(t, r).Status)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Succeeded}, b.history(id))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, id))
	k := b.key(in.IdempotencyKey)
	require.False(t, k.locked, "the key is finished")
	require.NotNil(t, k.code)
	require.EqualValues(t, http.StatusCreated, *k.code)
	require.JSONEq(t, string(r.Body), string(k.body))

	replay, err := svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.True(t, replay.Replayed)
	require.Equal(t, http.StatusCreated, replay.Code)
}
