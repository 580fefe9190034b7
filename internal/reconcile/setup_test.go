package reconcile_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/provider"
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
	pool     *pgxpool.Pool
	sim      *proctest.Sim
	provider *provider.Resilient
	tenantID string

	lookups     atomic.Int64 // GET /v1/charges?idempotency_key=…
	failLookups atomic.Bool  // answer those with 503
}

// setup gives the test a fresh database, a simulator behind a real HTTP
// server (with a counter and a fault switch for look-ups) and a tenant.
func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{t: t, ctx: t.Context(), db: testdb.New(t)}
	b.pool = b.db.Pool
	b.sim = proctest.ServeSim(t, providersim.Config{APIKey: simAPIKey}, func(sim http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// newProvider is a resilient client of url (proctest.FastProvider when cfg is zero).
func (b *bundle) newProvider(url string, cfg provider.Config) *provider.Resilient {
	if cfg == (provider.Config{}) {
		cfg = proctest.FastProvider
	}
	return provider.NewResilient(provider.NewHTTPClient("sim", url, simAPIKey, &http.Client{}), cfg, nil)
}

// testPayments are timings that match the fast test provider client.
var testPayments = payments.Config{
	LockTTL: 30 * time.Second, KeyTTL: 48 * time.Hour,
	CallTimeout: 300 * time.Millisecond, RetryBudget: 500 * time.Millisecond, BreakerCooldown: 10 * time.Second,
}

// reconciler returns a Reconciler on the bundle's database and simulator
// with the test's timing settings.
func (b *bundle) reconciler(cfg reconcile.Config) *reconcile.Reconciler {
	b.t.Helper()
	return b.reconcilerWith(b.pool, b.provider, testPayments, cfg)
}

// reconcilerWith returns a Reconciler whose payments service runs on pool
// and p with the timing settings timing.
func (b *bundle) reconcilerWith(pool *pgxpool.Pool, p payments.Provider, timing payments.Config, cfg reconcile.Config) *reconcile.Reconciler {
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

// attemptOpts describe an attempt to seed.
type attemptOpts struct {
	status     attempts.Status // CREATED, PENDING, UNKNOWN, SUCCEEDED or FAILED
	age        time.Duration   // how long ago its last change was
	charge     charge          // what the provider has under its derived key
	amount     int64           // default 500
	chargeID   string          // recorded charge of a SUCCEEDED attempt without a provider charge
	locked     bool            // a live request holds its key
	checkCount int
	review     bool
	nextCheck  *time.Duration // next_check_at = now() + *nextCheck; nil: NULL
}

// attempt seeds an attempt the way the service leaves it: key and attempt
// committed together, the audited transitions of its path, the provider's
// charge under the derived key, and the key unlocked unless o.locked.
func (b *bundle) attempt(o attemptOpts) string {
	t := b.t
	t.Helper()
	if o.amount == 0 {
		o.amount = 500
	}
	id := attempts.NewID()
	key := "key-" + id
	method := "pm_card_visa"
	if o.charge == chargeDeclined {
		method = "pm_card_declined"
	}
	res, err := idempotency.Acquire(b.ctx, b.pool, idempotency.Config{LockTTL: testPayments.LockTTL, KeyTTL: testPayments.KeyTTL},
		b.tenantID, key, []byte("fp"), id, func(ctx context.Context, tx pgx.Tx, attemptID string) error {
			_, err := attempts.Insert(ctx, tx, attempts.New{
				ID: attemptID, TenantID: b.tenantID, OrderID: "order-" + attemptID, IdempotencyKey: key,
				Amount: o.amount, Currency: "USD", PaymentMethod: method,
			})
			return err
		})
	require.NoError(t, err)
	require.Equal(t, idempotency.Owned, res.Outcome)

	var ch *provider.Charge
	if o.charge != noCharge {
		r := b.provider.CreateCharge(b.ctx, provider.ChargeRequest{
			Amount: 500, Currency: "USD", PaymentMethod: method, Reference: id, IdempotencyKey: attempts.ProviderKey(id),
		})
		require.NotNil(t, r.Charge, "charge at the simulator: %v", r.Err)
		ch = r.Charge
	}
	var path []attempts.Change
	switch o.status {
	case attempts.Pending:
		path = []attempts.Change{{To: attempts.Pending}}
	case attempts.Unknown:
		path = []attempts.Change{{To: attempts.Pending}, {To: attempts.Unknown}}
	case attempts.Succeeded:
		c := attempts.Change{To: attempts.Succeeded, ChargeID: o.chargeID}
		if ch != nil {
			c.ChargeID = ch.ID
		}
		path = []attempts.Change{{To: attempts.Pending}, c}
	case attempts.Failed:
		c := attempts.Change{To: attempts.Failed, FailureCode: attempts.FailureProviderNoRecord}
		if o.charge == chargeDeclined {
			c.ChargeID, c.FailureCode = ch.ID, "card_declined"
		}
		path = []attempts.Change{{To: attempts.Pending}, c}
	}
	require.NoError(t, db.WithTx(b.ctx, b.pool, func(tx pgx.Tx) error {
		for _, c := range path {
			c.ID, c.Source, c.Reason = id, attempts.SourceAPI, "test"
			if _, applied, err := attempts.Transition(b.ctx, tx, c); err != nil || !applied {
				require.True(t, applied, "transition to %s", c.To)
				return err
			}
		}
		a, err := attempts.Get(b.ctx, tx, id)
		if err != nil {
			return err
		}
		if a.Status.Final() {
			_, err = payments.FinishKey(b.ctx, tx, res.Lock, a)
		}
		return err
	}))
	if !o.locked && !o.status.Final() {
		_, err = idempotency.Release(b.ctx, b.pool, res.Lock)
		require.NoError(t, err)
	}
	var next *int64
	if o.nextCheck != nil {
		ms := o.nextCheck.Milliseconds()
		next = &ms
	}
	b.exec(`UPDATE payment_attempts
		SET updated_at = now() - $2::bigint * interval '1 millisecond', check_count = $3, needs_review = $4,
		    next_check_at = now() + $5::bigint * interval '1 millisecond'
		WHERE id = $1`, id, o.age.Milliseconds(), o.checkCount, o.review, next)
	return id
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

func ptr[T any](v T) *T { return &v }
