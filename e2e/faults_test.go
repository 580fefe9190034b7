package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// requireUnknown checks a 202 answer: the payment is UNKNOWN, with no charge
// recorded, and its key is neither locked nor stored (a retry resumes it).
func requireUnknown(t *testing.T, s *faultStack, key string, r apiclient.Response) {
	t.Helper()
	require.Equal(t, 202, r.Status, "%s", r)
	require.Equal(t, "UNKNOWN", r.Str("status"), "%s", r)
	require.Nil(t, r.JSON["provider_charge_id"], "%s", r)
	require.False(t, r.Replayed())
	locked, stored := s.keyState(t, key)
	require.False(t, locked, "an UNKNOWN answer releases the key")
	require.False(t, stored, "an UNKNOWN answer is not stored")
}

// payUntilServed retries key on c while the answer says "not now" (the
// breaker is open: 503; the key is busy: 409) and returns the first other answer.
func payUntilServed(t *testing.T, c *proctest.Client, key string, body any) apiclient.Response {
	t.Helper()
	var r apiclient.Response
	testkit.Eventually(t, time.Minute, "a retry of "+key+" is served", func() bool {
		r = c.MustPay(t, key, body)
		return r.Status != 503 && r.Status != 409
	})
	return r
}

// twoPods starts pod A and pod B with the short timings and returns their clients.
func (s *faultStack) twoPods(t *testing.T) (a, b *proctest.Client) {
	t.Helper()
	_, a = s.startPod(t, "pod-a", shortTimings(shortLockTTL)...)
	_, b = s.startPod(t, "pod-b", shortTimings(shortLockTTL)...)
	return a, b
}

// payWithAnswersLost pays body with key on c while the provider loses every
// answer after charging (its faults stay so): the answer is 202 UNKNOWN,
// and the payment's id is returned.
func (s *faultStack) payWithAnswersLost(t *testing.T, c *proctest.Client, key string, body apiclient.Payment) string {
	t.Helper()
	s.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true})
	r := c.MustPay(t, key, body)
	requireUnknown(t, s, key, r)
	return r.Str("id")
}

// The provider creates the charge and the answer is lost, on every call:
// the service retries under the same key until its budget is spent and
// answers 202 UNKNOWN, never FAILED. Once the provider answers again, a retry
// with the same key resumes the payment and gets the charge already made.
func TestFaultDropAfterCommitIsUnknownThenResumes(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	a, b := s.twoPods(t)
	const key = "drop-1"
	body := apiclient.Visa("o-drop", 500)

	id := s.payWithAnswersLost(t, a, key, body)
	charges := s.sim.Charges(t)
	require.Len(t, charges, 1, "the first call charged; its retries found the same charge")
	require.Equal(t, id, charges[0].Reference)
	require.GreaterOrEqual(t, s.sim.Stats(t).ChargeCalls, int64(2), "the lost answers were retried")
	require.Equal(t, "UNKNOWN", onlyPaymentOf(t, b, "o-drop")["status"])

	s.sim.ClearFaults(t)
	// Pod A's breaker may have opened on the lost answers: poll through its cooldown.
	r := payUntilServed(t, a, key, body)
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, "SUCCEEDED", r.Str("status"))
	require.Equal(t, id, r.Str("id"), "the retry resumed the same payment")
	require.Equal(t, charges[0].ID, r.Str("provider_charge_id"))
	require.False(t, r.Replayed())
	require.Len(t, s.sim.Charges(t), 1, "exactly one charge")

	again := b.MustPay(t, key, body)
	require.Equal(t, 201, again.Status, "%s", again)
	require.True(t, again.Replayed())
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown, attempts.Succeeded}, s.trail(t, id))
}

// Every charge call fails with 503 before charging: the service answers 202
// (its calls may have charged, as far as it can tell) or, once its breaker is
// open, 503 provider_unavailable; nothing is charged. After the provider
// recovers and the breaker's cooldown passes, the same key resumes to 201
// with exactly one charge.
func TestFaultProvider503NeverChargesThenResumes(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	_, a := s.startPod(t, "pod-a", shortTimings(shortLockTTL)...)
	const key = "err-1"
	body := apiclient.Visa("o-err", 500)

	s.sim.SetFaults(t, providersim.Faults{ErrorRate: 1.0, ErrorStatus: 503})
	var id string
	answers := map[int]int{}
	testkit.Eventually(t, time.Minute, "the breaker opens and refuses", func() bool {
		r := a.MustPay(t, key, body)
		answers[r.Status]++
		switch r.Status {
		case 202:
			requireUnknown(t, s, key, r)
			if id == "" {
				id = r.Str("id")
			}
			require.Equal(t, id, r.Str("id"))
			return false
		case 503:
			require.NoError(t, r.CheckProblem(503, "provider_unavailable"))
			requireRetryAfter(t, r)
			return true
		}
		require.Failf(t, "unexpected answer", "want 202 or 503 while the provider fails, got %s", r)
		return false
	})
	require.Positive(t, answers[202], "the first request reached the provider: its outcome is unknown")
	require.Empty(t, s.sim.Charges(t), "a failed call charges nothing")
	require.Positive(t, s.sim.Stats(t).ChargeCalls)

	s.sim.ClearFaults(t)
	r := payUntilServed(t, a, key, body)
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, id, r.Str("id"))
	charges := s.sim.Charges(t)
	require.Len(t, charges, 1, "exactly one charge")
	require.Equal(t, charges[0].ID, r.Str("provider_charge_id"))
	require.Equal(t, id, charges[0].Reference)

	trail := s.trail(t, id)
	require.True(t, attempts.LegalPath(trail), "trail %v", trail)
	require.Equal(t, attempts.Succeeded, trail[len(trail)-1])
}

// With the breaker open a brand-new key is refused before any provider call:
// 503 provider_unavailable with Retry-After, the attempt stays CREATED and
// its key is released, so the same key later resumes it to 201.
func TestFaultBreakerOpenRefusesNewKeyThenResumes(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	// One failed call opens the breaker, and it stays open long enough for
	// the next request to find it open even on a slow machine.
	_, a := s.startPod(t, "pod-a", shortTimings(shortLockTTL, "PROVIDER_BREAKER_FAILURES=1", "PROVIDER_BREAKER_COOLDOWN=5s")...)
	_, b := s.startPod(t, "pod-b", shortTimings(shortLockTTL)...)

	s.sim.SetFaults(t, providersim.Faults{ErrorRate: 1.0, ErrorStatus: 503})
	tripped := a.MustPay(t, "trip-1", apiclient.Visa("o-trip", 500))
	requireUnknown(t, s, "trip-1", tripped)

	const key = "new-1"
	body := apiclient.Visa("o-new", 700)
	r := a.MustPay(t, key, body)
	require.NoError(t, r.CheckProblem(503, "provider_unavailable"))
	require.Equal(t, 5, requireRetryAfter(t, r), "Retry-After is the breaker's cooldown")
	p := onlyPaymentOf(t, b, "o-new")
	require.Equal(t, "CREATED", p["status"], "the refused attempt never reached the provider")
	id, _ := p["id"].(string)
	locked, stored := s.keyState(t, key)
	require.False(t, locked, "a 503 releases the key")
	require.False(t, stored, "a 503 is not stored")
	require.Equal(t, int64(1), s.sim.Stats(t).ChargeCalls, "only the call that tripped the breaker was made")

	s.sim.ClearFaults(t)
	r = payUntilServed(t, a, key, body)
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, id, r.Str("id"), "the same key resumed the CREATED attempt")
	require.Equal(t, 1, s.sim.SucceededChargesFor(t, id))
	require.Len(t, s.sim.Charges(t), 1, "exactly one charge")
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Succeeded}, s.trail(t, id))
}

// GET ?sync=true on an UNKNOWN payment asks the provider, which holds the
// charge whose answer was lost: the payment becomes SUCCEEDED, and the key's
// response is stored so that a retry replays it without calling the provider.
func TestSyncResolvesUnknownPaymentFromTheProvider(t *testing.T) {
	t.Parallel()
	s := newFaultStack(t)
	a, b := s.twoPods(t)
	const key = "sync-1"
	body := apiclient.Visa("o-sync", 500)

	id := s.payWithAnswersLost(t, a, key, body)
	s.sim.ClearFaults(t)
	charges := s.sim.Charges(t)
	require.Len(t, charges, 1)
	calls := s.sim.Stats(t).ChargeCalls

	plain, err := b.Get("/v1/payments/" + id)
	require.NoError(t, err)
	require.Equal(t, 200, plain.Status, "%s", plain)
	require.Equal(t, "UNKNOWN", plain.Str("status"), "without sync the stored status is answered")

	// Pod B's breaker has never failed, so its lookup goes through at once.
	synced, err := b.Get("/v1/payments/" + id + "?sync=true")
	require.NoError(t, err)
	require.Equal(t, 200, synced.Status, "%s", synced)
	require.Equal(t, "SUCCEEDED", synced.Str("status"), "%s", synced)
	require.Equal(t, charges[0].ID, synced.Str("provider_charge_id"))

	again := a.MustPay(t, key, body)
	require.Equal(t, 201, again.Status, "%s", again)
	require.True(t, again.Replayed(), "sync stored the key's final response")
	require.Equal(t, charges[0].ID, again.Str("provider_charge_id"))
	require.Equal(t, calls, s.sim.Stats(t).ChargeCalls, "neither the sync nor the replay made a charge call")
	require.Len(t, s.sim.Charges(t), 1)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown, attempts.Succeeded}, s.trail(t, id))
}
