package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// requireReplayOf checks that again is first replayed: same status and body.
func requireReplayOf(t *testing.T, first, again apiclient.Response) {
	t.Helper()
	require.Equal(t, first.Status, again.Status, "body: %s", again.Raw)
	require.True(t, again.Replayed(), "Idempotent-Replayed on %s", again)
	require.JSONEq(t, string(first.Raw), string(again.Raw))
}

// Scenario 2 of docs/failure-scenarios.md: two identical requests about 5 ms apart on different
// pods while the provider takes 800 ms: the key's primary key lets exactly
// one run (201); the other answers 409 with Retry-After; a later retry
// replays the 201.
func TestSeedScenario2ConcurrentPodsOneRunsOneWaits(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 800})
	body := apiclient.Visa("o-2", 500)

	var wg sync.WaitGroup
	var ra, rb apiclient.Response
	var errA, errB error
	wg.Go(func() { ra, errA = s.a.Pay("seed-2", body) })
	// The scenario itself: the second request leaves 5 ms after the first.
	time.Sleep(5 * time.Millisecond)
	wg.Go(func() { rb, errB = s.b.Pay("seed-2", body) })
	wg.Wait()
	require.NoError(t, errA)
	require.NoError(t, errB)

	won, lost := ra, rb
	if rb.Status == http.StatusCreated {
		won, lost = rb, ra
	}
	require.Equal(t, http.StatusCreated, won.Status, "pod answers: %s / %s", ra, rb)
	require.False(t, won.Replayed())
	require.Equal(t, "SUCCEEDED", won.Str("status"))
	require.NoError(t, lost.CheckProblem(http.StatusConflict, "idempotency_key_in_use"))
	requireRetryAfter(t, lost)

	var retry apiclient.Response
	testkit.Eventually(t, 30*time.Second, "a retry is no longer 409", func() bool {
		retry = s.b.MustPay(t, "seed-2", body)
		return retry.Status != http.StatusConflict
	})
	requireReplayOf(t, won, retry)
	require.Equal(t, won.Str("id"), retry.Str("id"))
	require.Equal(t, won.Str("provider_charge_id"), retry.Str("provider_charge_id"))

	charges := s.sim.Charges(t)
	require.Len(t, charges, 1)
	require.Equal(t, won.Str("provider_charge_id"), charges[0].ID)
	require.Equal(t, won.Str("id"), charges[0].Reference)
}

// Scenario 3 of docs/failure-scenarios.md: the same key with a different amount is a client bug and
// is refused; it never answers the first request's result.
func TestSeedScenario3SameKeyDifferentRequestIs422(t *testing.T) {
	t.Parallel()
	s := setup(t)
	first := s.a.MustPay(t, "seed-3", apiclient.Visa("o-3", 500))
	require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Raw)

	require.NoError(t, s.b.MustPay(t, "seed-3", apiclient.Visa("o-3", 700)).CheckProblem(http.StatusUnprocessableEntity, "idempotency_key_reused"))
	require.NoError(t, s.a.MustPay(t, "seed-3", apiclient.Visa("o-3b", 500)).CheckProblem(http.StatusUnprocessableEntity, "idempotency_key_reused"))
	requireReplayOf(t, first, s.b.MustPay(t, "seed-3", apiclient.Visa("o-3", 500)))
	require.Len(t, s.sim.Charges(t), 1)
}

// Forty requests with one key, released together and split across both
// pods: one of them charges; every other one waits (409) or replays (201).
func TestManyConcurrentRequestsOneKeyOneCharge(t *testing.T) {
	t.Parallel()
	s := setup(t)
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 300})
	const n = 40
	body := apiclient.Visa("o-many", 1234)

	resps := make([]apiclient.Response, n)
	errs := make([]error, n)
	testkit.Together(n, func(i int) {
		c := s.a
		if i%2 == 1 {
			c = s.b
		}
		resps[i], errs[i] = c.Pay("many", body)
	})

	created, fresh := 0, 0
	var paymentID string
	for i, r := range resps {
		require.NoError(t, errs[i], "request %d", i)
		switch r.Status {
		case http.StatusCreated:
			created++
			if !r.Replayed() {
				fresh++
			}
			if paymentID == "" {
				paymentID = r.Str("id")
			}
			require.Equal(t, paymentID, r.Str("id"), "every 201 is the one payment")
			require.Equal(t, "SUCCEEDED", r.Str("status"))
		case http.StatusConflict:
			require.Equal(t, "idempotency_key_in_use", r.Str("code"), "body: %s", r.Raw)
		default:
			require.Failf(t, "unexpected answer", "request %d: want 201 or 409, got %s", i, r)
		}
	}
	require.GreaterOrEqual(t, created, 1)
	require.Equal(t, 1, fresh, "exactly one answer is not a replay")

	require.Len(t, s.sim.Charges(t), 1)
	require.EqualValues(t, 1, s.sim.Stats(t).Charges)
	list, err := s.a.Get("/v1/payments?order_id=o-many")
	require.NoError(t, err)
	require.Len(t, list.JSON["data"], 1, "one payment for the order: %s", list.Raw)
}

// Tenants share nothing: a payment id of one is 404 for the other, and the
// same idempotency key (and order id) in another tenant is its own payment.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := setup(t)
	other := proctest.CreateTenant(t, s.dbURL, "other shop")
	otherB := proctest.NewClient(s.podB.URL(), other.APIKey)

	mine := s.a.MustPay(t, "shared-key", apiclient.Visa("o-1", 500))
	require.Equal(t, http.StatusCreated, mine.Status, "body: %s", mine.Raw)
	theirs := otherB.MustPay(t, "shared-key", apiclient.Visa("o-1", 500))
	require.Equal(t, http.StatusCreated, theirs.Status, "body: %s", theirs.Raw)
	require.False(t, theirs.Replayed(), "another tenant's key is a different key")
	require.NotEqual(t, mine.Str("id"), theirs.Str("id"))
	require.NotEqual(t, mine.Str("provider_charge_id"), theirs.Str("provider_charge_id"))

	r, err := otherB.Get("/v1/payments/" + mine.Str("id"))
	require.NoError(t, err)
	require.NoError(t, r.CheckProblem(http.StatusNotFound, "payment_not_found"))
	r, err = s.b.Get("/v1/payments/" + theirs.Str("id"))
	require.NoError(t, err)
	require.NoError(t, r.CheckProblem(http.StatusNotFound, "payment_not_found"))
	list, err := otherB.Get("/v1/payments?order_id=o-1")
	require.NoError(t, err)
	require.Len(t, list.JSON["data"], 1)

	require.Len(t, s.sim.Charges(t), 2)
	require.EqualValues(t, 2, s.sim.Stats(t).Charges)
}

// The order guard: a second key for an order that already has a SUCCEEDED
// payment is refused, naming that payment, and charges nothing.
func TestOrderGuardRefusesSecondKeyForPaidOrder(t *testing.T) {
	t.Parallel()
	s := setup(t)
	paid := s.a.MustPay(t, "k-1", apiclient.Visa("o-1", 500))
	require.Equal(t, http.StatusCreated, paid.Status, "body: %s", paid.Raw)

	r := s.b.MustPay(t, "k-2", apiclient.Visa("o-1", 500))
	require.NoError(t, r.CheckProblem(http.StatusConflict, "order_already_has_payment"))
	require.Equal(t, paid.Str("id"), r.Str("payment_id"))
	// Not stored: the same refused request is refused again, not replayed.
	require.NoError(t, s.a.MustPay(t, "k-2", apiclient.Visa("o-1", 500)).CheckProblem(http.StatusConflict, "order_already_has_payment"))
	require.Len(t, s.sim.Charges(t), 1)
}

// A reordered, re-spaced but equal body with the same key is the same
// request: it replays (and calls nothing), it is not a 422.
func TestReorderedBodyReplays(t *testing.T) {
	t.Parallel()
	s := setup(t)
	first := s.a.MustPay(t, "k-order", `{"order_id":"o-r","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`)
	require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Raw)
	calls := s.sim.Stats(t).ChargeCalls

	// (500.0 for 500 is refused as invalid_request, not an equal body: an
	// amount is a plain integer literal; see internal/api/decode.go.)
	again := s.b.MustPay(t, "k-order", "{\n  \"payment_method\" : \"pm_card_visa\",\n\t\"currency\":\"USD\",  \"amount\": 500 , \"order_id\":\"o-r\"\n}\n")
	requireReplayOf(t, first, again)
	require.Equal(t, calls, s.sim.Stats(t).ChargeCalls, "a replay calls nothing")
	require.Len(t, s.sim.Charges(t), 1)
}

// The RFC 8941 quoted form of a key is the same key.
func TestQuotedKeyReplaysPlainKey(t *testing.T) {
	t.Parallel()
	s := setup(t)
	first := s.a.MustPay(t, "k-1", apiclient.Visa("o-1", 500))
	require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Raw)
	requireReplayOf(t, first, s.b.MustPay(t, `"k-1"`, apiclient.Visa("o-1", 500)))

	escaped := s.b.MustPay(t, `"k\"2\\"`, apiclient.Visa("o-2", 500))
	require.Equal(t, http.StatusCreated, escaped.Status, "body: %s", escaped.Raw)
	requireReplayOf(t, escaped, s.a.MustPay(t, `k"2\`, apiclient.Visa("o-2", 500)))
	require.Len(t, s.sim.Charges(t), 2)
}

// A decline is final: 402 FAILED, replayed as such; the order may then be
// paid under a new key.
func TestDeclinedCardThenNewKeySucceeds(t *testing.T) {
	t.Parallel()
	s := setup(t)
	declinedBody := apiclient.Payment{OrderID: "o-d", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_declined"}
	declined := s.a.MustPay(t, "k-declined", declinedBody)
	require.Equal(t, http.StatusPaymentRequired, declined.Status, "body: %s", declined.Raw)
	require.False(t, declined.Replayed())
	require.Equal(t, "FAILED", declined.Str("status"))
	require.Equal(t, declineCode(t), declined.Str("failure_code"))
	requireReplayOf(t, declined, s.b.MustPay(t, "k-declined", declinedBody))

	paid := s.b.MustPay(t, "k-retry-visa", apiclient.Visa("o-d", 500))
	require.Equal(t, http.StatusCreated, paid.Status, "body: %s", paid.Raw)
	require.False(t, paid.Replayed())
	require.Equal(t, "SUCCEEDED", paid.Str("status"))
	require.NotEqual(t, declined.Str("id"), paid.Str("id"))

	require.Equal(t, []string{"CREATED", "PENDING", "FAILED"}, auditTrail(t, s, declined.Str("id")))
	require.Len(t, s.sim.Charges(t), 2)
	require.Equal(t, 1, s.sim.SucceededChargesFor(t, paid.Str("id")))
	require.Equal(t, 0, s.sim.SucceededChargesFor(t, declined.Str("id")))
}

// Every transition is in the audit table, in order, along the state machine.
func TestAuditTrailOfSucceededPayment(t *testing.T) {
	t.Parallel()
	s := setup(t)
	r := s.a.MustPay(t, "k-audit", apiclient.Visa("o-audit", 500))
	require.Equal(t, http.StatusCreated, r.Status, "body: %s", r.Raw)
	trail := auditTrail(t, s, r.Str("id"))
	require.Equal(t, []string{"CREATED", "PENDING", "SUCCEEDED"}, trail)
	path := make([]attempts.Status, len(trail))
	for i, st := range trail {
		path[i] = attempts.Status(st)
	}
	require.True(t, attempts.LegalPath(path))
	// A replay adds nothing to the trail.
	requireReplayOf(t, r, s.b.MustPay(t, "k-audit", apiclient.Visa("o-audit", 500)))
	require.Equal(t, trail, auditTrail(t, s, r.Str("id")))
}

// auditTrail reads the statuses payment id went through from the audit
// table, checking that each row starts where the previous one ended and
// that the API recorded it.
func auditTrail(t *testing.T, s *stack, id string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT from_status, to_status, source, reason
		FROM payment_attempt_events WHERE attempt_id = $1 ORDER BY id`, id)
	require.NoError(t, err)
	var trail []string
	prev := ""
	for rows.Next() {
		var from *string
		var to, source, reason string
		require.NoError(t, rows.Scan(&from, &to, &source, &reason))
		if prev == "" {
			require.Nil(t, from, "the first row has no from_status")
		} else {
			require.NotNil(t, from)
			require.Equal(t, prev, *from, "row →%s", to)
		}
		require.Equal(t, "api", source)
		require.NotEmpty(t, reason)
		trail = append(trail, to)
		prev = to
	}
	require.NoError(t, rows.Err())
	return trail
}
