package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/provider"
	simclient "github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/reconcile"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/testdb"
)

const simAPIKey = "sk_sim"

// bundle is one test's database, simulator and provider client.
type bundle struct {
	t        *testing.T
	ctx      context.Context
	db       *testdb.DB
	pool     *db.Pool
	sim      *proctest.Sim
	provider *provider.Resilient
	tenantID string

	lookups     atomic.Int64 // GET /v1/charges?idempotency_key=…
	failLookups atomic.Bool  // answer those with 503
	lists       atomic.Int64 // GET /v1/charges?created_gte=… (pages of a day)
	unpaged     atomic.Int64 // those without a limit: a whole day in one answer
}

// setup gives the test a fresh database, a simulator behind a real HTTP
// server (with a counter and a fault switch for look-ups) and a tenant.
func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{t: t, ctx: t.Context(), db: testdb.New(t)}
	b.pool = b.db.Pool
	b.sim = proctest.ServeSim(t, providersim.Config{APIKey: simAPIKey}, func(sim http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == "/v1/charges" && r.URL.Query().Has("created_gte") {
				b.lists.Add(1)
				if !r.URL.Query().Has("limit") {
					b.unpaged.Add(1)
				}
			}
			if r.Method == http.MethodGet && r.URL.Path == "/v1/charges" && r.URL.Query().Has("idempotency_key") {
				b.lookups.Add(1)
				if b.failLookups.Load() {
					http.Error(w, `{"error":{"code":"unavailable"}}`, http.StatusServiceUnavailable)
					return
				}
			}
			sim.ServeHTTP(w, r)
		})
	})
	b.provider = b.newProvider(b.sim.URL(), provider.Config{})
	ten, err := tenants.Create(b.ctx, b.pool, "reconcile-test")
	require.NoError(t, err)
	b.tenantID = ten.ID
	return b
}

// newProvider is a resilient client of url (testProvider when cfg is zero).
func (b *bundle) newProvider(url string, cfg provider.Config) *provider.Resilient {
	if cfg == (provider.Config{}) {
		cfg = testProvider
	}
	return provider.NewResilient(simclient.NewHTTPClient("sim", url, simAPIKey, &http.Client{}), cfg, nil)
}

// testProvider is proctest.FastProvider with a call timeout a loaded 2-core
// machine (the race detector, other packages' tests) never reaches by
// accident: these tests count every check's outcome, and a look-up of the
// in-process simulator that times out would turn a not-found into an error.
// Tests of slow or failing providers set their own timings.
var testProvider = func() provider.Config {
	c := proctest.FastProvider
	c.CallTimeout, c.RetryBudget = 2*time.Second, 3*time.Second
	return c
}()

// testPayments are timings that match testProvider.
var testPayments = payments.Config{
	LockTTL: 30 * time.Second, KeyTTL: 48 * time.Hour,
	CallTimeout: testProvider.CallTimeout, RetryBudget: testProvider.RetryBudget, BreakerCooldown: 10 * time.Second,
}

// reconciler returns a Reconciler on the bundle's database and simulator
// with the test's timing settings.
func (b *bundle) reconciler(cfg reconcile.Config) *reconcile.Reconciler {
	b.t.Helper()
	return b.reconcilerWith(b.pool, b.provider, testPayments, cfg)
}

// reconcilerWith returns a Reconciler whose payments service runs on pool
// and p with the timing settings timing.
func (b *bundle) reconcilerWith(pool *db.Pool, p payments.Provider, timing payments.Config, cfg reconcile.Config) *reconcile.Reconciler {
	b.t.Helper()
	svc, err := payments.NewService(pool, p, timing, nil)
	require.NoError(b.t, err)
	r, err := reconcile.New(pool, svc, cfg)
	require.NoError(b.t, err)
	return r
}

// charge is what the simulator holds for an attempt.
type charge int

const (
	noCharge charge = iota
	chargeSucceeded
	chargeDeclined
)

// attempt seeds an attempt (testdb.Attempt, in the bundle's tenant) after
// the simulator made the charge ch under its derived key, as a call of the
// service would have: a declined charge fails it with card_declined; a
// FAILED attempt whose charge succeeded (an orphan) records no charge.
func (b *bundle) attempt(ch charge, o testdb.AttemptOpts) string {
	b.t.Helper()
	o.TenantID, o.ID = b.tenantID, attempts.NewID()
	if ch == chargeDeclined {
		o.PaymentMethod = "pm_card_declined"
	}
	if ch != noCharge {
		// Always 500, whatever the attempt's amount, as settlement's
		// amount-mismatch case needs.
		o.ChargeID = b.charge(o.ID, o.PaymentMethod).ID
	}
	if o.Status == attempts.Failed && ch != chargeDeclined {
		o.ChargeID, o.FailureCode = "", attempts.FailureProviderNoRecord
	}
	return testdb.Attempt(b.t, b.pool, o).ID
}

func (b *bundle) exec(sql string, args ...any) {
	b.t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(b.t, err, sql)
}

func (b *bundle) get(id string) attempts.Attempt {
	b.t.Helper()
	a, err := attempts.Get(b.ctx, b.pool, id)
	require.NoError(b.t, err)
	return a
}

// keyResponse is the response code stored on the attempt's key (0: none).
func (b *bundle) keyResponse(id string) int {
	b.t.Helper()
	var code *int32
	require.NoError(b.t, b.pool.QueryRow(b.ctx, `SELECT response_code FROM idempotency_keys WHERE attempt_id = $1`, id).Scan(&code))
	if code == nil {
		return 0
	}
	return int(*code)
}

// untilNextCheck is next_check_at - now() by the database clock.
func (b *bundle) untilNextCheck(id string) time.Duration {
	b.t.Helper()
	var ms *float64
	require.NoError(b.t, b.pool.QueryRow(b.ctx,
		`SELECT EXTRACT(EPOCH FROM next_check_at - now()) * 1000 FROM payment_attempts WHERE id = $1`, id).Scan(&ms))
	require.NotNil(b.t, ms, "next_check_at of %s is NULL", id)
	return time.Duration(*ms * float64(time.Millisecond))
}

// requireAbout asserts that got is d ± jitter (and a second of slack for the test itself).
func requireAbout(t *testing.T, d time.Duration, jitter float64, got time.Duration) {
	t.Helper()
	lo := time.Duration(float64(d)*(1-jitter)) - time.Second
	hi := time.Duration(float64(d)*(1+jitter)) + time.Second
	require.True(t, got >= lo && got <= hi, "got %s, want %s ±%.0f%%", got, d, jitter*100)
}

// simImport records charges at the simulator as given.
func (b *bundle) simImport(charges []providersim.Charge) {
	b.t.Helper()
	body, err := json.Marshal(map[string]any{"data": charges})
	require.NoError(b.t, err)
	resp, err := http.Post(b.sim.URL()+"/_sim/charges", "application/json", bytes.NewReader(body))
	require.NoError(b.t, err)
	defer resp.Body.Close()
	require.Equal(b.t, http.StatusOK, resp.StatusCode)
}

func ptr[T any](v T) *T { return &v }
