package payments_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
)

const simAPIKey = "sk_sim"

// timings are short enough for a lock to expire within a test: a lock of
// 1s must (and does) outlive a call of 500ms with 300ms of retries.
var timings = payments.Config{
	LockTTL: time.Second, KeyTTL: time.Hour,
	CallTimeout: 500 * time.Millisecond, RetryBudget: 300 * time.Millisecond, BreakerCooldown: time.Minute,
}

// providerConfig matches timings; five failed calls open the breaker for a
// minute (no test waits for it to close).
var providerConfig = provider.Config{
	CallTimeout: timings.CallTimeout, RetryBudget: timings.RetryBudget, BreakerFailures: 5, BreakerCooldown: time.Minute,
}

// bundle is one test's database with a tenant, a simulator in process, a
// provider client of it that the test can stall, and the service.
type bundle struct {
	t        *testing.T
	ctx      context.Context
	pool     *db.Pool
	sim      *proctest.Sim
	prov     *gatedProvider
	svc      *payments.Service
	tenantID string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, timings, providerConfig)
}

// setupWith is setup with other timings for the service and its provider client.
func setupWith(t *testing.T, cfg payments.Config, pc provider.Config) *bundle {
	t.Helper()
	d := testdb.New(t)
	b := &bundle{t: t, ctx: t.Context(), pool: d.Pool, sim: proctest.ServeSim(t, providersim.Config{APIKey: simAPIKey}, nil)}
	b.prov = &gatedProvider{Resilient: b.sim.Provider(simAPIKey, pc)}
	b.svc = b.service(b.prov, cfg)
	b.tenantID = testdb.Tenant(t, b.pool, testdb.TenantOpts{}).ID
	return b
}

// service is another payments service on the bundle's database: another
// pod, with its own provider client (and so its own breaker).
func (b *bundle) service(p payments.Provider, cfg payments.Config) *payments.Service {
	b.t.Helper()
	svc, err := payments.NewService(b.pool, p, cfg, nil)
	require.NoError(b.t, err)
	return svc
}

// otherPod is a service with a provider client of its own, which the test
// can stall too.
func (b *bundle) otherPod() (*payments.Service, *gatedProvider) {
	p := &gatedProvider{Resilient: b.sim.Provider(simAPIKey, providerConfig)}
	return b.service(p, timings), p
}

// input is a create request of 500 USD by visa for order with key. The
// fingerprint is testdb's, so that a seeded key takes the request as its own.
func (b *bundle) input(key, order string) payments.CreateInput {
	return payments.CreateInput{
		TenantID: b.tenantID, IdempotencyKey: key, Fingerprint: testdb.Fingerprint,
		OrderID: order, Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa",
	}
}

// result is what a Create returned.
type result struct {
	reply payments.Reply
	err   error
}

// createAsync runs Create in a goroutine; wait for it with awaitResult.
func (b *bundle) createAsync(svc *payments.Service, in payments.CreateInput) <-chan result {
	done := make(chan result, 1)
	go func() {
		r, err := svc.Create(context.Background(), in)
		done <- result{r, err}
	}()
	return done
}

// awaitResult waits (30s at most) for a Create started with createAsync.
func awaitResult(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("Create did not return within 30s")
	}
	return result{}
}

// payment decodes a reply's body.
func payment(t *testing.T, r payments.Reply) attempts.Payment {
	t.Helper()
	var p attempts.Payment
	require.NoError(t, json.Unmarshal(r.Body, &p), "reply body %s", r.Body)
	return p
}

// requireAppErr requires err to be an *apperr.Error with code, and returns it.
func requireAppErr(t *testing.T, err error, code apperr.Code) *apperr.Error {
	t.Helper()
	var e *apperr.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, code, e.Code, "%v", err)
	return e
}

// keyRow is an idempotency key as stored.
type keyRow struct {
	locked bool
	token  int64
	code   *int32
	body   []byte
}

func (b *bundle) key(key string) keyRow {
	b.t.Helper()
	var k keyRow
	require.NoError(b.t, b.pool.QueryRow(b.ctx, `
		SELECT locked_until IS NOT NULL AND locked_until > now(), lock_token, response_code, response_body
		FROM idempotency_keys WHERE tenant_id = $1 AND key = $2`, b.tenantID, key).Scan(&k.locked, &k.token, &k.code, &k.body))
	return k
}

func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(b.ctx, query, args...).Scan(&n), query)
	return n
}

func (b *bundle) history(id string) []attempts.Status {
	b.t.Helper()
	h, err := attempts.History(b.ctx, b.pool, id)
	require.NoError(b.t, err)
	return h
}

func (b *bundle) get(id string) attempts.Attempt {
	b.t.Helper()
	a, err := attempts.Get(b.ctx, b.pool, id)
	require.NoError(b.t, err)
	return a
}

// only returns the one attempt of order.
func (b *bundle) only(order string) attempts.Attempt {
	b.t.Helper()
	list, err := attempts.ListByOrder(b.ctx, b.pool, b.tenantID, order)
	require.NoError(b.t, err)
	require.Len(b.t, list, 1, "attempts of %s", order)
	return list[0]
}

// gatedProvider is the real provider client with test signals: it can stall
// the service at the check before the call or right after the call returned,
// as a paused process (a GC pause, a starved CPU) would, and it can answer
// that the breaker is closed whatever the breaker says.
type gatedProvider struct {
	*provider.Resilient
	beforeCall       atomic.Pointer[stall] // taken by the next BreakerOpen check
	afterCall        atomic.Pointer[stall] // taken by the next CreateCharge that returns
	breakerLooksShut atomic.Bool
}

func (p *gatedProvider) BreakerOpen() bool {
	if s := p.beforeCall.Swap(nil); s != nil {
		s.hold()
	}
	if p.breakerLooksShut.Load() {
		return false
	}
	return p.Resilient.BreakerOpen()
}

func (p *gatedProvider) CreateCharge(ctx context.Context, req provider.ChargeRequest) provider.Result {
	r := p.Resilient.CreateCharge(ctx, req)
	if s := p.afterCall.Swap(nil); s != nil {
		s.hold()
	}
	return r
}

// stall holds the one goroutine that reaches it until the test releases it
// (at the latest when the test ends, so that nothing is left blocked).
type stall struct {
	reached, released chan struct{}
	release           func()
}

func newStall(t *testing.T) *stall {
	s := &stall{reached: make(chan struct{}), released: make(chan struct{})}
	s.release = sync.OnceFunc(func() { close(s.released) })
	t.Cleanup(s.release)
	return s
}

func (s *stall) hold() {
	close(s.reached)
	<-s.released
}

// awaitReached waits (30s at most) for the stalled goroutine to arrive.
func (s *stall) awaitReached(t *testing.T) {
	t.Helper()
	select {
	case <-s.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the stall point was not reached within 30s")
	}
}
