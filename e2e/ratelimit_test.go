package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
)

// TENANT_RATE_LIMIT on a real pod: a burst over the bucket gets 429
// rate_limited with Retry-After, the refused creates are not stored (no key
// row, no attempt, no provider call), and another tenant is not affected.
func TestTenantRateLimitProcess(t *testing.T) {
	t.Parallel()
	// 0.2/s with a burst of 3: the test's requests cannot earn a new token.
	s := setupOps(t, opsOptions{podEnv: []string{"TENANT_RATE_LIMIT=0.2", "TENANT_RATE_BURST=3"}})
	var created, limited int
	for i := range 6 {
		key := fmt.Sprintf("rl-%d", i)
		r := s.client.MustPay(t, key, apiclient.Visa("o-"+key, 500))
		switch r.Status {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
			limited++
			require.Equal(t, "rate_limited", r.Str("code"), "%s", r)
			require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"))
			ra := retryAfterSeconds(r)
			require.True(t, ra >= 1 && ra <= 5, "Retry-After %q", r.Header.Get("Retry-After"))
			var keys, attempts int
			require.NoError(t, s.db.Pool.QueryRow(t.Context(),
				`SELECT (SELECT count(*) FROM idempotency_keys WHERE key = $1),
				        (SELECT count(*) FROM payment_attempts WHERE idempotency_key = $1)`, key).Scan(&keys, &attempts))
			require.Zero(t, keys+attempts, "a refused create stores nothing")
		default:
			t.Fatalf("create %s: %s", key, r)
		}
	}
	require.Equal(t, 3, created)
	require.Equal(t, 3, limited)
	require.EqualValues(t, 3, s.sim.Stats(t).ChargeCalls, "no provider call for the refused ones")

	other := proctest.CreateTenant(t, s.db.URL, "other-shop")
	oc := proctest.NewClient(s.pod.URL(), other.APIKey)
	r := oc.MustPay(t, "rl-other", apiclient.Visa("o-other", 500))
	require.Equal(t, http.StatusCreated, r.Status, "another tenant: %s", r)
}
