package webhook

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
)

// TestRaceWithAPICompletion races the API's completing transaction (on
// another pod, simulated here by calling attempts.Transition directly)
// against the provider's charge.succeeded webhook for the same charge.
// Whichever lands second must apply nothing: one SUCCEEDED audit row and one
// outbox row per payment, every round.
func TestRaceWithAPICompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rounds = 50
	wins := map[string]int{}
	for round := range rounds {
		a, chargeID := b.attempt(attempts.Pending)
		ev := newEvent(EventChargeSucceeded, a, chargeID)
		body := ev.body(t)
		sig := sign(testSecret, testNow.Unix(), body)

		start := make(chan struct{})
		var (
			wg         sync.WaitGroup
			apiApplied bool
			apiErr     error
			hook       reply
			hookErr    error
		)
		wg.Go(func() {
			<-start
			jitter(3 * time.Millisecond) // the webhook has an HTTP hop to make up
			apiErr = db.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
				var err error
				_, apiApplied, err = attempts.Transition(context.Background(), tx, attempts.Change{
					ID: a.ID, To: attempts.Succeeded, ChargeID: chargeID,
					Source: attempts.SourceAPI, Reason: "provider charged",
				})
				return err
			})
		})
		wg.Go(func() {
			<-start
			jitter(time.Millisecond)
			hook, hookErr = b.tryPost(body, sig)
		})
		close(start)
		wg.Wait()

		noErr(t, apiErr, "API transaction")
		noErr(t, hookErr, "webhook")
		expectOK(t, hook)
		eq(t, b.audits(a.ID, attempts.Succeeded), 1, "round %d: SUCCEEDED audit rows", round)
		eq(t, b.outbox(a.ID), 1, "round %d: outbox rows", round)
		got := b.get(a.ID)
		eq(t, got.Status, attempts.Succeeded, "round %d: status", round)
		eq(t, deref(got.ProviderChargeID), chargeID, "round %d: charge id", round)
		outcome := b.outcome(ev.ID)
		webhookApplied := outcome == outcomeApplied
		if apiApplied == webhookApplied {
			t.Fatalf("round %d: api applied %v, webhook outcome %s: want exactly one to apply", round, apiApplied, outcome)
		}
		if !webhookApplied {
			eq(t, outcome, outcomeNoop, "round %d: webhook outcome when the API won", round)
		}
		wins[map[bool]string{true: "webhook", false: "api"}[webhookApplied]]++
	}
	t.Logf("winners over %d rounds: %v", rounds, wins)
}

// jitter delays a racer by a random time below upTo, so that either may land first.
func jitter(upTo time.Duration) { time.Sleep(rand.N(upTo)) }

// TestWebhookWhileAPICommitIsPending pins the interleaving the random race
// may miss: the API has moved the attempt to SUCCEEDED but not committed
// when the webhook arrives. The webhook must wait for the row lock, then see
// SUCCEEDED and apply nothing.
func TestWebhookWhileAPICommitIsPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a, chargeID := b.attempt(attempts.Pending)
	ev := newEvent(EventChargeSucceeded, a, chargeID)
	body := ev.body(t)

	tx, err := b.pool.Begin(ctx)
	noErr(t, err, "begin API transaction")
	defer func() { _ = tx.Rollback(ctx) }()
	_, applied, err := attempts.Transition(ctx, tx, attempts.Change{
		ID: a.ID, To: attempts.Succeeded, ChargeID: chargeID, Source: attempts.SourceAPI, Reason: "provider charged",
	})
	noErr(t, err, "API transition")
	eq(t, applied, true, "API applied")

	done := make(chan reply, 1)
	go func() {
		r, err := b.tryPost(body, sign(testSecret, testNow.Unix(), body))
		if err != nil {
			r = reply{status: -1, body: []byte(err.Error())}
		}
		done <- r
	}()
	// Wait, by polling with a deadline, until the webhook's transaction is
	// blocked on the attempt's row lock.
	deadline := time.Now().Add(10 * time.Second)
	for b.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the webhook never waited for the row lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	noErr(t, tx.Commit(ctx), "commit API transaction")

	expectOK(t, <-done)
	eq(t, b.outcome(ev.ID), outcomeNoop, "webhook outcome")
	eq(t, b.audits(a.ID, attempts.Succeeded), 1, "SUCCEEDED audit rows")
	eq(t, b.count(`SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND to_status = 'SUCCEEDED' AND source = 'api'`, a.ID), 1, "API audit rows")
	eq(t, b.outbox(a.ID), 1, "outbox rows")
}
