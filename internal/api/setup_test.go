package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/api"
	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/provider"
	simclient "github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/ratelimit"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/testdb"
)

// bundle is one test's API in front of a fresh database and an in-process
// provider simulator, with two tenants.
type bundle struct {
	t    testing.TB
	pool *db.Pool
	url  string
	anon *proctest.Client // sends no API key: requests set their own headers
	sim  *proctest.Sim    // the provider, "sim", key sk_sim
	a, b tenants.Created
}

func setup(t testing.TB) *bundle {
	t.Helper()
	return setupWith(t, setupOptions{})
}

// setupOptions vary setup.
type setupOptions struct {
	// providerHTTP is the provider client's HTTP client (nil: a new one).
	providerHTTP *http.Client
	// simWrap wraps the simulator's handler, e.g. to record what it is sent.
	simWrap func(http.Handler) http.Handler
	// rateLimit is the API's per-tenant limiter (nil: off).
	rateLimit *ratelimit.Limiter
	// replayCache is the service's replay cache (nil: off).
	replayCache *idempotency.ReplayCache
}

func setupWith(t testing.TB, opt setupOptions) *bundle {
	t.Helper()
	d := testdb.New(t)
	log := slog.New(slog.DiscardHandler)
	sim := proctest.ServeSim(t, providersim.Config{APIKey: "sk_sim"}, opt.simWrap)
	provHTTP := opt.providerHTTP
	if provHTTP == nil {
		provHTTP = &http.Client{}
	}
	prov := provider.NewResilient(simclient.NewHTTPClient("sim", sim.URL(), "sk_sim", provHTTP), provider.Config{
		CallTimeout: 2 * time.Second, RetryBudget: 3 * time.Second, BreakerFailures: 5, BreakerCooldown: time.Second,
	}, log)
	svc, err := payments.NewService(d.Pool, prov, payments.Config{
		LockTTL: 30 * time.Second, KeyTTL: 48 * time.Hour, CallTimeout: 2 * time.Second,
		RetryBudget: 3 * time.Second, BreakerCooldown: time.Second,
	}, log)
	require.NoError(t, err)
	svc.UseReplayCache(opt.replayCache)
	srv := httptest.NewServer(api.New(api.Deps{Pool: d.Pool, Payments: svc, Log: log, RateLimit: opt.rateLimit}))
	t.Cleanup(srv.Close)

	b := &bundle{t: t, pool: d.Pool, url: srv.URL, anon: proctest.NewClient(srv.URL, ""), sim: sim}
	b.a = testdb.Tenant(t, d.Pool, testdb.TenantOpts{Name: "shop-a"})
	b.b = testdb.Tenant(t, d.Pool, testdb.TenantOpts{Name: "shop-b"})
	return b
}

// do sends one request without an API key; headers with an empty value are left out.
func (b *bundle) do(method, path string, body []byte, headers map[string]string) apiclient.Response {
	b.t.Helper()
	return b.anon.MustDo(b.t, method, path, body, headers)
}

// client is tenant's client of the API.
func (b *bundle) client(tenant tenants.Created) *proctest.Client {
	return proctest.NewClient(b.url, tenant.APIKey)
}

// pay posts a raw body as tenant with idempotency key.
func (b *bundle) pay(tenant tenants.Created, key, body string) apiclient.Response {
	b.t.Helper()
	return b.client(tenant).MustPay(b.t, key, body)
}

func (b *bundle) get(tenant tenants.Created, path string) apiclient.Response {
	b.t.Helper()
	return b.client(tenant).MustGet(b.t, path)
}

// requireNothingWritten checks that no attempt, key or audit row exists.
func (b *bundle) requireNothingWritten() {
	b.t.Helper()
	for _, table := range []string{"payment_attempts", "idempotency_keys", "payment_attempt_events", "outbox"} {
		var n int
		require.NoError(b.t, b.pool.QueryRow(b.t.Context(), "SELECT count(*) FROM "+table).Scan(&n))
		require.Zero(b.t, n, "rows in %s", table)
	}
}

// body builds a create body from fields, JSON-encoding each value.
func body(fields map[string]any) string {
	raw, _ := json.Marshal(fields)
	return string(raw)
}

func visa(order string, amount int64) string {
	return body(map[string]any{"order_id": order, "amount": amount, "currency": "USD", "payment_method": "pm_card_visa"})
}

// validFields is a valid create body as a mutable map.
func validFields() map[string]any {
	return map[string]any{"order_id": "o-1", "amount": 500, "currency": "USD", "payment_method": "pm_card_visa"}
}
