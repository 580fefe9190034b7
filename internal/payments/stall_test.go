package payments_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// takeOverAsync retries in on svc, in a goroutine, while its key is in use
// (as a client following Retry-After would), for 30s at most, and delivers
// the first other answer: the one of the retry that took the key over once
// the stalled owner's lock expired.
func takeOverAsync(svc *payments.Service, in payments.CreateInput) <-chan result {
	done := make(chan result, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, err := svc.Create(context.Background(), in)
			var e *apperr.Error
			if !errors.As(err, &e) || e.Code != apperr.IdempotencyKeyInUse {
				done <- result{r, err}
				return
			}
			if time.Now().After(deadline) {
				done <- result{err: fmt.Errorf("the key was still in use after 30s: %w", err)}
				return
			}
			time.Sleep(testkit.PollInterval)
		}
	}()
	return done
}

// stalledOwner starts in on the bundle's service, stalled at stallAt, and
// once the stall is reached and the lock has expired, lets another pod take
// the key over and stall at its own check before the call, holding the key.
// It returns both requests and the new owner's stall.
func (b *bundle) stalledOwner(in payments.CreateInput, stallAt func(*gatedProvider, *stall)) (stalled, owner <-chan result, ownerStall *stall) {
	b.t.Helper()
	st := newStall(b.t)
	stallAt(b.prov, st)
	stalled = b.createAsync(b.svc, in)
	st.awaitReached(b.t)

	pod, prov := b.otherPod()
	ownerStall = newStall(b.t)
	prov.beforeCall.Store(ownerStall)
	owner = takeOverAsync(pod, in)
	ownerStall.awaitReached(b.t)
	require.EqualValues(b.t, 2, b.key(in.IdempotencyKey).token, "the other pod took the key over")
	st.release()
	return stalled, owner, ownerStall
}

// A request stalls after taking the key, before it marks the attempt
// PENDING and calls the provider, until its lock has expired and a retry on
// another pod has taken the key over (and is about to call). Resumed, the
// stalled owner can no longer write under its lock: it marks nothing,
// calls nothing, stores nothing, and answers the attempt as committed;
// the new owner then pays, once.
func TestStalledOwnerBeforeTheCallCallsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.input("key-stall-before", "order-stall-before")
	stalled, owner, ownerStall := b.stalledOwner(in, func(p *gatedProvider, s *stall) { p.beforeCall.Store(s) })

	first := awaitResult(t, stalled)
	require.NoError(t, first.err)
	require.Equal(t, http.StatusAccepted, first.reply.Code, "%s", first.reply.Body)
	require.False(t, first.reply.Replayed)
	require.Equal(t, attempts.Created, payment(t, first.reply).Status)
	id := first.reply.PaymentID
	require.Equal(t, []attempts.Status{attempts.Created}, b.history(id), "the stalled owner marked nothing")
	require.Equal(t, providersim.Stats{}, b.sim.Stats(t), "the stalled owner called nothing")
	k := b.key(in.IdempotencyKey)
	require.True(t, k.locked, "the new owner holds the key")
	require.EqualValues(t, 2, k.token)
	require.Nil(t, k.code, "the stalled owner stored nothing")

	ownerStall.release()
	second := awaitResult(t, owner)
	require.NoError(t, second.err)
	require.Equal(t, http.StatusCreated, second.reply.Code, "%s", second.reply.Body)
	require.False(t, second.reply.Replayed)
	require.Equal(t, id, second.reply.PaymentID)
	require.Equal(t, attempts.Succeeded, payment(t, second.reply).Status)
	require.Equal(t, providersim.Stats{ChargeCalls: 1, Charges: 1}, b.sim.Stats(t))
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Succeeded}, b.history(id))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, id))
	require.Zero(t, b.count(`SELECT count(*) FROM anomalies`))
	k = b.key(in.IdempotencyKey)
	require.False(t, k.locked)
	require.JSONEq(t, string(second.reply.Body), string(k.body), "the key holds the new owner's answer")
}

// A request stalls after the provider charged, before its completing
// transaction, until its lock has expired and a retry on another pod has
// taken the key over (and is about to call). Resumed, the stalled owner
// cannot complete: its transaction is refused because the lock token moved,
// so it writes no transition, no outbox row and no response, and calls
// nothing again. The new owner calls the provider under the same derived
// key, gets the same charge, and completes.
func TestStalledOwnerAfterTheCallCannotComplete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := b.input("key-stall-after", "order-stall-after")
	stalled, owner, ownerStall := b.stalledOwner(in, func(p *gatedProvider, s *stall) { p.afterCall.Store(s) })

	first := awaitResult(t, stalled)
	require.NoError(t, first.err)
	require.Equal(t, http.StatusAccepted, first.reply.Code, "%s", first.reply.Body)
	require.Equal(t, attempts.Pending, payment(t, first.reply).Status, "the stalled owner answers the attempt as committed")
	id := first.reply.PaymentID
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending}, b.history(id), "the stalled owner completed nothing")
	require.Zero(t, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, id))
	charges := b.sim.Charges(t)
	require.Len(t, charges, 1, "the stalled owner's call charged")
	require.Equal(t, providersim.Stats{ChargeCalls: 1, Charges: 1}, b.sim.Stats(t), "and it did not call again")
	k := b.key(in.IdempotencyKey)
	require.True(t, k.locked, "the new owner holds the key")
	require.Nil(t, k.code, "the stalled owner stored nothing")

	ownerStall.release()
	second := awaitResult(t, owner)
	require.NoError(t, second.err)
	require.Equal(t, http.StatusCreated, second.reply.Code, "%s", second.reply.Body)
	paid := payment(t, second.reply)
	require.Equal(t, attempts.Succeeded, paid.Status)
	require.Equal(t, charges[0].ID, *paid.ProviderChargeID, "the provider answered the retry with the charge it made")
	require.Equal(t, providersim.Stats{ChargeCalls: 2, Charges: 1}, b.sim.Stats(t), "one call each, one charge")
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Succeeded}, b.history(id))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, id))
	require.Zero(t, b.count(`SELECT count(*) FROM anomalies`))
	require.JSONEq(t, string(second.reply.Body), string(b.key(in.IdempotencyKey).body), "the key holds the new owner's answer")
}
