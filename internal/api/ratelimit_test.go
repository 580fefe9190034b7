package api_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/ratelimit"
	"github.com/acme/paymentsvc/internal/testkit"
)

// manualClock is the rate limiter's clock in these tests.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *manualClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func setupLimited(t *testing.T, limit float64, burst int) (*bundle, *manualClock) {
	t.Helper()
	c := &manualClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return setupWith(t, setupOptions{rateLimit: ratelimit.New(ratelimit.Config{Limit: limit, Burst: burst, Now: c.now})}), c
}

// countRows is the count(*) of sql.
func countRows(t *testing.T, b *bundle, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

// Over its burst a tenant gets 429 rate_limited with Retry-After, before its
// Idempotency-Key is looked at: nothing is stored, and the same request goes
// through as is once a token is free. Another tenant is not affected.
func TestRateLimitRefusesOverTheBurstAndStoresNothing(t *testing.T) {
	t.Parallel()
	b, clock := setupLimited(t, 0.5, 3) // a token every 2s
	for i, key := range []string{"rl-1", "rl-2", "rl-3"} {
		r := b.pay(b.a, key, visa("o-rl-"+key, 500))
		require.Equal(t, http.StatusCreated, r.Status, "request %d of the burst: %s", i, r)
	}
	r := b.pay(b.a, "rl-4", visa("o-rl-4", 500))
	require.NoError(t, r.CheckProblem(http.StatusTooManyRequests, "rate_limited"))
	require.Equal(t, "2", r.Header.Get("Retry-After"), "whole seconds until a token is free")
	require.Zero(t, countRows(t, b, `SELECT count(*) FROM idempotency_keys WHERE key = 'rl-4'`), "no key row")
	require.Equal(t, 3, countRows(t, b, `SELECT count(*) FROM payment_attempts`), "no attempt")

	// A replay of a stored key is refused too: the limit comes first.
	r = b.pay(b.a, "rl-1", visa("o-rl-rl-1", 500))
	require.NoError(t, r.CheckProblem(http.StatusTooManyRequests, "rate_limited"))

	// Another tenant has a bucket of its own.
	r = b.pay(b.b, "rl-4", visa("o-rl-4", 500))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)

	clock.add(1 * time.Second)
	r = b.pay(b.a, "rl-4", visa("o-rl-4", 500))
	require.NoError(t, r.CheckProblem(http.StatusTooManyRequests, "rate_limited"))
	require.Equal(t, "1", r.Header.Get("Retry-After"), "at least 1")

	clock.add(1 * time.Second)
	r = b.pay(b.a, "rl-4", visa("o-rl-4", 500))
	require.Equal(t, http.StatusCreated, r.Status, "the same request once a token is free: %s", r)
	require.Empty(t, r.Header.Get("Idempotent-Replayed"), "the refused request had stored nothing")
}

// The whole tenant API is limited, reads included; authentication comes
// first (an unknown key is 401 and takes no token), and the operations
// endpoints and webhooks are not limited.
func TestRateLimitCoversTheTenantAPIOnly(t *testing.T) {
	t.Parallel()
	b, _ := setupLimited(t, 1, 1)
	anon := func(method, path string, key string) apiclient.Response {
		h := map[string]string{}
		if key != "" {
			h["Authorization"] = "Bearer " + key
		}
		return b.do(method, path, nil, h)
	}
	for range 3 {
		require.Equal(t, http.StatusUnauthorized, anon(http.MethodGet, "/v1/payments", "sk_unknown").Status)
		require.Equal(t, http.StatusOK, anon(http.MethodGet, "/healthz", "").Status)
	}
	require.Equal(t, http.StatusOK, b.get(b.a, "/v1/payments").Status, "the bucket's one token is still there")
	for _, path := range []string{"/v1/payments", "/v1/payments/pay_x", "/v1/payments/pay_x/refunds", "/v1/refunds/rfd_x"} {
		require.NoError(t, b.get(b.a, path).CheckProblem(http.StatusTooManyRequests, "rate_limited"))
	}
	r := b.do(http.MethodPost, "/v1/payments/pay_x/refunds", []byte(`{}`), map[string]string{
		"Authorization": "Bearer " + b.a.APIKey, "Idempotency-Key": "rl-refund", "Content-Type": "application/json",
	})
	require.NoError(t, r.CheckProblem(http.StatusTooManyRequests, "rate_limited"))
	require.Equal(t, http.StatusOK, anon(http.MethodGet, "/healthz", "").Status)
	require.Equal(t, http.StatusOK, b.get(b.b, "/v1/payments").Status)
}

// Many concurrent requests of one tenant: exactly burst of them pass.
func TestRateLimitConcurrentBurst(t *testing.T) {
	t.Parallel()
	b, _ := setupLimited(t, 1, 5)
	statuses := make(chan int, 20)
	testkit.Together(20, func(int) {
		statuses <- b.get(b.a, "/v1/payments").Status
	})
	close(statuses)
	got := map[int]int{}
	for s := range statuses {
		got[s]++
	}
	require.Equal(t, map[int]int{http.StatusOK: 5, http.StatusTooManyRequests: 15}, got)
}
