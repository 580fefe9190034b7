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
	"github.com/acme/paymentsvc/internal/testdb"
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
// It returns both requests, the new owner's stall and its lock token.
func (b *bundle) stalledOwner(in payments.CreateInput, stallAt func(*gatedProvider, *stall)) (stalled, owner <-chan result, ownerStall *stall, ownerToken int64) {
	b.t.Helper()
	st := newStall(b.t)
	stallAt(b.prov, st)
	stalled = b.createAsync(b.svc, in)
	st.awaitReached(b.t)
	held := b.key(in.IdempotencyKey).token

	pod, prov := b.otherPod()
	ownerStall = newStall(b.t)
	prov.beforeCall.Store(ownerStall)
	owner = takeOverAsync(pod, in)
	ownerStall.awaitReached(b.t)
	require.Equal(b.t, held+1, b.key(in.IdempotencyKey).token, "the other pod took the key over")
	st.release()
	return stalled, owner, ownerStall, held + 1
}

// requireStalledAnswer waits for the stalled owner's answer and requires
// that it wrote nothing: it answers 202 with the attempt as committed (in
// status, along path), and the key is still the new owner's, locked and
// without a response. It returns the payment's id.
func (b *bundle) requireStalledAnswer(stalled <-chan result, in payments.CreateInput, ownerToken int64, status attempts.Status, path []attempts.Status) string {
	b.t.Helper()
	first := awaitResult(b.t, stalled)
	require.NoError(b.t, first.err)
	require.Equal(b.t, http.StatusAccepted, first.reply.Code, "%s", first.reply.Body)
	require.False(b.t, first.reply.Replayed)
	require.Equal(b.t, status, payment(b.t, first.reply).Status, "the stalled owner answers the attempt as committed")
	id := first.reply.PaymentID
	require.Equal(b.t, path, b.history(id), "the stalled owner made no transition")
	k := b.key(in.IdempotencyKey)
	require.True(b.t, k.locked, "the new owner holds the key")
	require.Equal(b.t, ownerToken, k.token, "the new owner's lock is untouched")
	require.Nil(b.t, k.code, "the stalled owner stored nothing")
	return id
}

// requireOwnerPays lets the new owner (held before its call) go on, and
// requires that it pays and completes payment id: 201 SUCCEEDED, its
// audited path, one outbox row, no anomaly, its answer stored on the key,
// and the simulator's counters then at want. It returns the payment.
func (b *bundle) requireOwnerPays(owner <-chan result, ownerStall *stall, in payments.CreateInput, id string, want providersim.Stats) attempts.Payment {
	b.t.Helper()
	ownerStall.release()
	second := awaitResult(b.t, owner)
	require.NoError(b.t, second.err)
	require.Equal(b.t, http.StatusCreated, second.reply.Code, "%s", second.reply.Body)
	require.False(b.t, second.reply.Replayed)
	require.Equal(b.t, id, second.reply.PaymentID)
	paid := payment(b.t, second.reply)
	require.Equal(b.t, attempts.Succeeded, paid.Status)
	require.Equal(b.t, want, b.sim.Stats(b.t))
	require.Equal(b.t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Succeeded}, b.history(id))
	require.Equal(b.t, 1, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, id))
	require.Zero(b.t, b.count(`SELECT count(*) FROM anomalies`))
	k := b.key(in.IdempotencyKey)
	require.False(b.t, k.locked)
	require.JSONEq(b.t, string(second.reply.Body), string(k.body), "the key holds the new owner's answer")
	return paid
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
	// A new key commits PENDING with the key, right before its call; the
	// window between the two is a resumed CREATED payment's (here one whose
	// first owner died after taking its key).
	testdb.Key(t, b.pool, testdb.KeyOpts{TenantID: b.tenantID, Key: in.IdempotencyKey, OrderID: in.OrderID, State: testdb.KeyReleased})
	stalled, owner, ownerStall, token := b.stalledOwner(in, func(p *gatedProvider, s *stall) { p.beforeCall.Store(s) })

	id := b.requireStalledAnswer(stalled, in, token, attempts.Created, []attempts.Status{attempts.Created})
	require.Equal(t, providersim.Stats{}, b.sim.Stats(t), "the stalled owner called nothing")

	b.requireOwnerPays(owner, ownerStall, in, id, providersim.Stats{ChargeCalls: 1, Charges: 1})
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
	stalled, owner, ownerStall, token := b.stalledOwner(in, func(p *gatedProvider, s *stall) { p.afterCall.Store(s) })

	id := b.requireStalledAnswer(stalled, in, token, attempts.Pending, []attempts.Status{attempts.Created, attempts.Pending})
	require.Zero(t, b.count(`SELECT count(*) FROM outbox WHERE payment_id = $1`, id))
	charges := b.sim.Charges(t)
	require.Len(t, charges, 1, "the stalled owner's call charged")
	require.Equal(t, providersim.Stats{ChargeCalls: 1, Charges: 1}, b.sim.Stats(t), "and it did not call again")

	// One call each, one charge: the provider answered the retry with the
	// charge it made for the stalled owner.
	paid := b.requireOwnerPays(owner, ownerStall, in, id, providersim.Stats{ChargeCalls: 2, Charges: 1})
	require.Equal(t, charges[0].ID, *paid.ProviderChargeID)
}
