package e2e

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// setupBehindProxy is setupOps with the pod's database connections going
// through a TCP proxy that the test can cut.
func setupBehindProxy(t *testing.T, opt opsOptions) (*opsStack, *proctest.TCPProxy) {
	t.Helper()
	var proxy *proctest.TCPProxy
	opt.podDatabaseURL = func(dbURL string) string {
		u, err := url.Parse(dbURL)
		require.NoError(t, err)
		proxy = proctest.StartTCPProxy(t, u.Host)
		return proxy.URL(t, dbURL)
	}
	return setupOps(t, opt), proxy
}

// requireDatabaseUnavailable checks a 503 database_unavailable problem with
// its Retry-After, and that it neither leaks internals nor claims that
// nothing was done.
func requireDatabaseUnavailable(t *testing.T, r apiclient.Response, what string) {
	t.Helper()
	opsProblem(t, r, http.StatusServiceUnavailable, "database_unavailable")
	require.GreaterOrEqual(t, retryAfterSeconds(r), 1, "%s: Retry-After: %s", what, r)
	require.LessOrEqual(t, retryAfterSeconds(r), 2, "%s: Retry-After: %s", what, r)
	detail := strings.ToLower(r.Str("detail"))
	require.NotContains(t, detail, "nothing was charged", what)
	for _, internal := range []string{"sqlstate", "connect", "127.0.0.1", "eof", "pgx"} {
		require.NotContains(t, detail, internal, "%s: no driver detail in the answer", what)
	}
}

// With the database unreachable, every API path answers 503
// database_unavailable with Retry-After (never 500), /readyz answers 503,
// and nothing is stored under the idempotency key: once the database is
// back, the same key creates the payment, charged exactly once.
func TestDatabaseOutageAnswers503(t *testing.T) {
	t.Parallel()
	v := newSpecValidator(t, nil)
	s, proxy := setupBehindProxy(t, opsOptions{transport: v.wrap})
	paid := s.client.MustPay(t, "db-0", apiclient.Visa("o-db-0", 500))
	require.Equal(t, http.StatusCreated, paid.Status, "%s", paid)

	proxy.Cut()
	requireDatabaseUnavailable(t, s.client.MustPay(t, "db-1", apiclient.Visa("o-db-1", 700)), "POST /v1/payments")
	requireDatabaseUnavailable(t, opsOK(t)(s.client.Get("/v1/payments/"+paid.Str("id"))), "GET /v1/payments/{id}")
	requireDatabaseUnavailable(t, opsOK(t)(s.client.Get("/v1/payments?order_id=o-db-0")), "GET /v1/payments")
	charge := providersim.Charge{ID: paid.Str("provider_charge_id"), Amount: 500, Currency: "USD",
		Status: providersim.StatusSucceeded, Reference: paid.Str("id"), Created: time.Now().Unix()}
	requireDatabaseUnavailable(t, s.postWebhook(t, s.secret, opsEvent("evt_db_1", providersim.EventChargeSucceeded, charge), nil), "POST /v1/webhooks/sim")
	ready := opsOK(t)(s.anon.Get("/readyz"))
	require.Equal(t, http.StatusServiceUnavailable, ready.Status, "%s", ready)
	require.EqualValues(t, 1, s.sim.Stats(t).ChargeCalls, "no charge while the database is away")

	proxy.Restore()
	testkit.Eventually(t, time.Minute, "/readyz answers 200 once the database is back", func() bool {
		r, err := s.anon.Get("/readyz")
		return err == nil && r.Status == http.StatusOK
	})
	r := s.client.MustPay(t, "db-1", apiclient.Visa("o-db-1", 700))
	require.Equal(t, http.StatusCreated, r.Status, "the 503 stored nothing under the key: %s", r)
	require.False(t, r.Replayed())
	require.Equal(t, 1, s.sim.SucceededChargesFor(t, r.Str("id")))
	require.EqualValues(t, 2, s.sim.Stats(t).Charges)
	require.Equal(t, http.StatusOK, opsOK(t)(s.client.Get("/v1/payments/"+paid.Str("id"))).Status)
	require.Contains(t, s.pod.Logs(), `"msg":"request failed: database unavailable"`)
	require.NotContains(t, s.pod.Logs(), `"msg":"request failed",`, "no 500 was logged")
}

// The database goes away while the provider is charging: the completing
// transaction fails, and the answer is 503 database_unavailable, which does
// not claim that nothing was charged. Nothing is released or undone: the
// key stays locked until its lock expires, and the retry with the same key
// then resumes the payment and gets the one charge the provider made.
func TestDatabaseLostWhileChargingIsNotTakenAsNotDone(t *testing.T) {
	t.Parallel()
	const lockTTL = 8 * time.Second
	s, proxy := setupBehindProxy(t, opsOptions{podEnv: []string{
		"PROVIDER_CALL_TIMEOUT=5s", "PROVIDER_RETRY_BUDGET=1s", "IDEMPOTENCY_LOCK_TTL=" + lockTTL.String(),
	}})
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 2000})

	answered := make(chan apiclient.Response, 1)
	failed := make(chan error, 1)
	go func() {
		r, err := s.client.Pay("mid-1", apiclient.Visa("o-mid", 900))
		if err != nil {
			failed <- err
			return
		}
		answered <- r
	}()
	testkit.Eventually(t, 30*time.Second, "the charge call reaches the provider", func() bool {
		return s.sim.Stats(t).ChargeCalls >= 1
	})
	proxy.Cut()
	var r apiclient.Response
	select {
	case r = <-answered:
	case err := <-failed:
		t.Fatalf("the create got no answer: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the create got no answer within a minute")
	}
	requireDatabaseUnavailable(t, r, "POST /v1/payments while charging")
	s.sim.ClearFaults(t)
	charges := s.sim.Charges(t)
	require.Len(t, charges, 1, "the provider charged")
	paymentID := charges[0].Reference

	proxy.Restore()
	testkit.Eventually(t, time.Minute, "/readyz answers 200 once the database is back", func() bool {
		ready, err := s.anon.Get("/readyz")
		return err == nil && ready.Status == http.StatusOK
	})
	// The key is still locked by the request that failed to record its
	// result (409), until the lock expires; then the retry takes it over.
	var retry apiclient.Response
	testkit.Eventually(t, lockTTL+time.Minute, "the retry resumes the payment once the lock expires", func() bool {
		retry = s.client.MustPay(t, "mid-1", apiclient.Visa("o-mid", 900))
		require.Contains(t, []int{http.StatusConflict, http.StatusCreated}, retry.Status, "%s", retry)
		return retry.Status == http.StatusCreated
	})
	require.Equal(t, paymentID, retry.Str("id"), "the same payment, resumed")
	require.Equal(t, "SUCCEEDED", retry.Str("status"))
	require.Equal(t, charges[0].ID, retry.Str("provider_charge_id"))
	require.Equal(t, 1, s.sim.SucceededChargesFor(t, paymentID), "charged exactly once")
	require.EqualValues(t, 1, s.sim.Stats(t).Charges)
}
