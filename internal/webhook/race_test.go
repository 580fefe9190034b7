package webhook

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestRaceWithAPICompletion races the API's completing transaction (on
// another pod, simulated here by calling attempts.Transition directly)
// against the provider's charge.succeeded webhook for the same charge.
// Whichever lands second must apply nothing: each round makes exactly one
// transition (one SUCCEEDED audit row, one outbox row). Over the rounds
// both orders must occur, or the test proved nothing about one of them:
// the rounds alternate a free race with a head start for either side, and
// go on (up to maxRounds) until each side has won at least once.
func TestRaceWithAPICompletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const minRounds, maxRounds = 30, 300
	wins := map[string]int{}
	round := 0
	for ; round < maxRounds && (round < minRounds || wins["api"] == 0 || wins["webhook"] == 0); round++ {
		a, chargeID := b.attempt(attempts.Pending)
		ev := newEvent(EventChargeSucceeded, a, chargeID)
		body := encode(t, ev)
		sig := sign(testSecret, testNow.Unix(), body)
		apiDelay, hookDelay := raceDelays(round)

		var (
			apiApplied bool
			apiErr     error
			hook       apiclient.Response
			hookErr    error
		)
		testkit.Together(2, func(racer int) {
			if racer == 1 {
				time.Sleep(hookDelay) // the delays under test, not waits for a condition
				hook, hookErr = b.tryPost(body, sig)
				return
			}
			time.Sleep(apiDelay)
			apiErr = db.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
				var err error
				_, apiApplied, err = attempts.Transition(context.Background(), tx, attempts.Change{
					ID: a.ID, To: attempts.Succeeded, ChargeID: chargeID,
					Source: attempts.SourceAPI, Reason: "provider charged",
				})
				return err
			})
		})

		require.NoError(t, apiErr, "round %d: API transaction", round)
		require.NoError(t, hookErr, "round %d: webhook", round)
		expectOK(t, hook)
		require.Equal(t, 1, b.audits(a.ID, attempts.Succeeded), "round %d: SUCCEEDED audit rows", round)
		require.Equal(t, 3, b.allAudits(a.ID), "round %d: audit rows (CREATED, PENDING, SUCCEEDED)", round)
		require.Equal(t, 1, b.outbox(a.ID), "round %d: outbox rows", round)
		got := b.get(a.ID)
		require.Equal(t, attempts.Succeeded, got.Status, "round %d: status", round)
		require.Equal(t, chargeID, deref(got.ProviderChargeID), "round %d: charge id", round)
		outcome := b.outcome(ev.ID)
		webhookApplied := outcome == outcomeApplied
		require.NotEqual(t, apiApplied, webhookApplied, "round %d: api applied %v, webhook outcome %s: want exactly one to apply", round, apiApplied, outcome)
		winner := "webhook"
		if !webhookApplied {
			require.Equal(t, outcomeNoop, outcome, "round %d: webhook outcome when the API won", round)
			winner = "api"
		}
		wins[winner]++
	}
	t.Logf("winners over %d rounds: %v", round, wins)
	require.Positive(t, wins["api"], "the API's transaction never landed first in %d rounds", round)
	require.Positive(t, wins["webhook"], "the webhook never landed first in %d rounds", round)
}

// raceDelays are how long each racer of a round waits after the start: a
// free race (a few milliseconds of jitter each, the webhook having an HTTP
// hop to make up) every third round, else a head start for one side that
// grows with the rounds, so that a slow machine still sees both orders.
func raceDelays(round int) (api, hook time.Duration) {
	head := time.Duration(10+round) * time.Millisecond
	switch round % 3 {
	case 0:
		return rand.N(3 * time.Millisecond), rand.N(time.Millisecond)
	case 1:
		return 0, head // the API first
	default:
		return head, 0 // the webhook first
	}
}

// TestWebhookWhileAPICommitIsPending pins the interleaving the random race
// may miss: the API has moved the attempt to SUCCEEDED but not committed
// when the webhook arrives. The webhook must wait for the row lock, then see
// SUCCEEDED and apply nothing.
func TestWebhookWhileAPICommitIsPending(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, chargeID := b.attempt(attempts.Pending)
	ev := newEvent(EventChargeSucceeded, a, chargeID)
	body := encode(t, ev)

	expectOK(t, b.deliverDuringTransition(body, attempts.Change{
		ID: a.ID, To: attempts.Succeeded, ChargeID: chargeID, Source: attempts.SourceAPI, Reason: "provider charged",
	}))
	require.Equal(t, outcomeNoop, b.outcome(ev.ID), "webhook outcome")
	require.Equal(t, 1, b.audits(a.ID, attempts.Succeeded), "SUCCEEDED audit rows")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM payment_attempt_events WHERE attempt_id = $1 AND to_status = 'SUCCEEDED' AND source = 'api'`, a.ID), "API audit rows")
	require.Equal(t, 1, b.outbox(a.ID), "outbox rows")
}

// TestWrongProviderJudgedOnTheLockedRow pins the interleaving where the
// payment's provider changes between the webhook's first read and its row
// lock: the payment is CREATED (no provider: its call to this provider was
// not sent, docs/providers.md) when the event is read, and the API is
// committing it PENDING at another provider. The event is from a provider
// the payment is not at when the webhook decides, so it must change nothing
// and be recorded as wrong_provider (as docs/providers.md
// states it), not move the payment to SUCCEEDED with this provider's charge.
func TestWrongProviderJudgedOnTheLockedRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a, chargeID := b.attempt(attempts.Created)
	require.Nil(t, a.Provider)
	ev := newEvent(EventChargeSucceeded, a, chargeID)
	body := encode(t, ev)

	// The API's markCalling at provider sim_b, not committed yet.
	expectOK(t, b.deliverDuringTransition(body, attempts.Change{
		ID: a.ID, To: attempts.Pending, Provider: "sim_b", Source: attempts.SourceAPI, Reason: "calling provider sim_b",
	}))
	got := b.get(a.ID)
	require.Equal(t, attempts.Pending, got.Status, "status")
	require.Equal(t, "sim_b", got.ProviderName(), "provider")
	require.Nil(t, got.ProviderChargeID, "charge id")
	require.Equal(t, outcomeAnomaly, b.outcome(ev.ID), "webhook outcome")
	require.Equal(t, 1, b.anomalies(anomalyWrongProvider, chargeID), "wrong_provider anomalies")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1`, a.ID), "anomalies of the attempt")
	require.Equal(t, 0, b.audits(a.ID, attempts.Succeeded), "SUCCEEDED audit rows")
	require.Equal(t, 0, b.outbox(a.ID), "outbox rows")
}

// deliverDuringTransition applies c in a transaction of its own (the API's),
// delivers the signed body while that transaction holds the attempt's row
// lock, commits once the webhook waits for the lock, and returns the
// webhook's answer.
func (b *bundle) deliverDuringTransition(body []byte, c attempts.Change) apiclient.Response {
	t := b.t
	t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err, "begin API transaction")
	defer func() { _ = tx.Rollback(ctx) }()
	_, applied, err := attempts.Transition(ctx, tx, c)
	require.NoError(t, err, "API transition")
	require.True(t, applied, "API applied")

	type result struct {
		r   apiclient.Response
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := b.tryPost(body, sign(testSecret, testNow.Unix(), body))
		done <- result{r, err}
	}()
	testkit.Eventually(t, 10*time.Second, "the webhook's transaction waits for the attempt's row lock", func() bool {
		return b.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
	})
	require.NoError(t, tx.Commit(ctx), "commit API transaction")

	select {
	case res := <-done:
		require.NoError(t, res.err)
		return res.r
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook got no answer within 30s of the API's commit")
		return apiclient.Response{}
	}
}
