package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/api"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
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
	a, b tenants.Created
}

func setup(t testing.TB) *bundle {
	t.Helper()
	return setupWith(t, setupOptions{})
}

// setupOptions vary setup.
type setupOptions struct {
	// providerHTTP is the provider client's HTTP client (nil: http.DefaultClient).
	providerHTTP *http.Client
	// simWrap wraps the simulator's handler, e.g. to record what it is sent.
	simWrap func(http.Handler) http.Handler
	// rateLimit is the API's per-tenant limiter (nil: off).
	rateLimit *ratelimit.Limiter
}

func setupWith(t testing.TB, opt setupOptions) *bundle {
	t.Helper()
	d := testdb.New(t)
	log := slog.New(slog.DiscardHandler)

	sim, err := providersim.New(providersim.Config{})
	require.NoError(t, err)
	var simHandler http.Handler = sim.Handler()
	if opt.simWrap != nil {
		simHandler = opt.simWrap(simHandler)
	}
	simSrv := httptest.NewServer(simHandler)
	t.Cleanup(func() {
		simSrv.Close()
		_ = sim.Close()
	})
	provHTTP := opt.providerHTTP
	if provHTTP == nil {
		provHTTP = http.DefaultClient
	}
	prov := provider.NewResilient(provider.NewHTTPClient("sim", simSrv.URL, "sk_sim", provHTTP), provider.Config{
		CallTimeout: 2 * time.Second, RetryBudget: 3 * time.Second, BreakerFailures: 5, BreakerCooldown: time.Second,
	}, log)
	svc, err := payments.NewService(d.Pool, prov, payments.Config{
		LockTTL: 30 * time.Second, KeyTTL: 48 * time.Hour, CallTimeout: 2 * time.Second,
		RetryBudget: 3 * time.Second, BreakerCooldown: time.Second,
	}, log)
	require.NoError(t, err)
	srv := httptest.NewServer(api.New(api.Deps{Pool: d.Pool, Payments: svc, Log: log, RateLimit: opt.rateLimit}))
	t.Cleanup(srv.Close)

	b := &bundle{t: t, pool: d.Pool, url: srv.URL}
	b.a, err = tenants.Create(t.Context(), d.Pool, "shop-a")
	require.NoError(t, err)
	b.b, err = tenants.Create(t.Context(), d.Pool, "shop-b")
	require.NoError(t, err)
	return b
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	raw    []byte
	json   map[string]any
}

func (r response) str(field string) string {
	s, _ := r.json[field].(string)
	return s
}

func (r response) String() string { return string(r.raw) }

// do sends one request; headers with an empty value are left out.
func (b *bundle) do(method, path string, body []byte, headers map[string]string) response {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), method, b.url+path, bytes.NewReader(body))
	require.NoError(b.t, err)
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &r.json)
	}
	return r
}

// pay posts a raw body as tenant with idempotency key.
func (b *bundle) pay(tenant tenants.Created, key, body string) response {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/payments", []byte(body), map[string]string{
		"Authorization": "Bearer " + tenant.APIKey, "Idempotency-Key": key, "Content-Type": "application/json",
	})
}

func (b *bundle) get(tenant tenants.Created, path string) response {
	b.t.Helper()
	return b.do(http.MethodGet, path, nil, map[string]string{"Authorization": "Bearer " + tenant.APIKey})
}

// requireProblem checks an RFC 9457 body with every field and the exact code.
func requireProblem(t *testing.T, r response, status int, code string, msg ...any) {
	t.Helper()
	require.Equal(t, status, r.status, "%v body: %s", msg, r)
	require.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	for _, f := range []string{"type", "title", "status", "detail", "code"} {
		require.Contains(t, r.json, f, "problem field %s in %s", f, r)
	}
	require.Equal(t, code, r.json["code"], "body: %s", r)
	require.EqualValues(t, status, r.json["status"])
	require.NotEmpty(t, r.str("type"))
	require.NotEmpty(t, r.str("title"))
	require.NotEmpty(t, r.str("detail"))
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
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
