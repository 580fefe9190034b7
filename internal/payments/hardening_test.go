package payments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	simclient "github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/testdb"
)

// harness is a database, an in-process simulator behind a real HTTP server
// (with a hook run before every charge call) and a tenant.
type harness struct {
	t        *testing.T
	db       *testdb.DB
	simURL   string
	tenantID string
	sim      *providersim.Server
	// beforeCharge, if set, runs in the simulator's handler before a
	// POST /v1/charges is served.
	beforeCharge atomic.Pointer[func()]
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, db: testdb.New(t)}
	sim, err := providersim.New(providersim.Config{APIKey: "sk_sim"})
	require.NoError(t, err)
	h.sim = sim
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/charges" {
			if f := h.beforeCharge.Load(); f != nil {
				(*f)()
			}
		}
		sim.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	h.simURL = srv.URL
	ten, err := tenants.Create(t.Context(), h.db.Pool, "payments-test")
	require.NoError(t, err)
	h.tenantID = ten.ID
	return h
}

// timing is fast enough for tests and valid (lock TTL > budget + timeout).
var timing = payments.Config{
	LockTTL: 3 * time.Second, KeyTTL: time.Hour,
	CallTimeout: 500 * time.Millisecond, RetryBudget: time.Second, BreakerCooldown: time.Minute,
}

func (h *harness) resilient(failures uint32) *provider.Resilient {
	return provider.NewResilient(simclient.NewHTTPClient("sim", h.simURL, "sk_sim", http.DefaultClient), provider.Config{
		CallTimeout: timing.CallTimeout, RetryBudget: timing.RetryBudget,
		BreakerFailures: failures, BreakerCooldown: timing.BreakerCooldown,
	}, nil)
}

func (h *harness) service(p payments.Provider) *payments.Service {
	h.t.Helper()
	svc, err := payments.NewService(h.db.Pool, p, timing, nil)
	require.NoError(h.t, err)
	return svc
}

func (h *harness) input(key, order string) payments.CreateInput {
	fp, err := idempotency.Fingerprint(http.MethodPost, "/v1/payments", []byte(`{"order_id":"`+order+`"}`))
	require.NoError(h.t, err)
	return payments.CreateInput{
		TenantID: h.tenantID, IdempotencyKey: key, Fingerprint: fp, OrderID: order,
		Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa",
	}
}

func (h *harness) faults(body string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPut, h.simURL+"/_sim/faults", bytes.NewBufferString(body))
	require.NoError(h.t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	_ = resp.Body.Close()
	require.Equal(h.t, http.StatusOK, resp.StatusCode)
}

func (h *harness) charges() int {
	h.t.Helper()
	resp, err := http.Get(h.simURL + "/_sim/stats")
	require.NoError(h.t, err)
	defer resp.Body.Close()
	var st struct {
		Charges int `json:"charges"`
	}
	require.NoError(h.t, jsonDecode(resp, &st))
	return st.Charges
}

// lyingBreaker reports the breaker closed whatever its state: the payment
// passes the check before PENDING, and the call itself is then refused, as
// when a half-open breaker's one trial is taken between the two.
type lyingBreaker struct{ *provider.Resilient }

func (lyingBreaker) BreakerOpen() bool { return false }

// openBreaker makes r's breaker open by one failed call.
func (h *harness) openBreaker(r *provider.Resilient) {
	h.t.Helper()
	h.faults(`{"error_rate":1,"error_status":503}`)
	res := r.CreateCharge(h.t.Context(), provider.ChargeRequest{Amount: 1, Currency: "USD", PaymentMethod: "pm_card_visa", Reference: "x", IdempotencyKey: "trip"})
	require.Equal(h.t, provider.Unknown, res.Outcome)
	require.True(h.t, r.BreakerOpen())
	h.faults(`{}`)
}

// TestNotSentReturnsToCreated: the breaker refuses the call after the
// request committed PENDING. The answer is 503 provider_unavailable, the
// attempt is back in CREATED (audit CREATED → PENDING → CREATED not_sent),
// the key is released and nothing was charged; the same key then pays once.
func TestNotSentReturnsToCreated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.resilient(1)
	h.openBreaker(r)
	in := h.input("k-notsent", "o-notsent")

	_, err := h.service(lyingBreaker{r}).Create(t.Context(), in)
	var ae *apperr.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, apperr.ProviderUnavailable, ae.Code)
	require.Equal(t, 60, ae.RetryAfter)

	var id, status string
	require.NoError(t, h.db.Pool.QueryRow(t.Context(),
		`SELECT id, status FROM payment_attempts WHERE tenant_id = $1 AND order_id = 'o-notsent'`, h.tenantID).Scan(&id, &status))
	require.Equal(t, "CREATED", status)
	hist, err := attempts.History(t.Context(), h.db.Pool, id)
	require.NoError(t, err)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Created}, hist)
	require.True(t, attempts.LegalPath(hist))
	var reason string
	require.NoError(t, h.db.Pool.QueryRow(t.Context(),
		`SELECT reason FROM payment_attempt_events WHERE attempt_id = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&reason))
	require.Equal(t, lifecycle.ReasonNotSent, reason)
	var locked, stored bool
	require.NoError(t, h.db.Pool.QueryRow(t.Context(),
		`SELECT locked_until IS NOT NULL, response_code IS NOT NULL FROM idempotency_keys WHERE attempt_id = $1`, id).Scan(&locked, &stored))
	require.False(t, locked, "key released")
	require.False(t, stored, "a 503 is not stored")
	require.Equal(t, 0, h.charges())

	// The provider is back: the same key resumes the CREATED attempt, once.
	reply, err := h.service(h.resilient(5)).Create(t.Context(), in)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, reply.Code)
	require.Equal(t, id, reply.PaymentID)
	require.Equal(t, 1, h.charges())
}

// TestNotSentLeavesAResumedPendingAttempt: an attempt that was PENDING before
// the request (an earlier request's call may have reached the provider) is
// not moved back to CREATED when this request's call is refused.
func TestNotSentLeavesAResumedPendingAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	in := h.input("k-resumed", "o-resumed")
	// An earlier request charged nothing but left the attempt PENDING and its
	// key unlocked (its owner died, and its lock expired).
	h.faults(`{"error_rate":1,"error_status":503}`)
	reply, err := h.service(h.resilient(100)).Create(t.Context(), in)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, reply.Code) // UNKNOWN after the budget
	h.faults(`{}`)

	r := h.resilient(1)
	h.openBreaker(r)
	_, err = h.service(lyingBreaker{r}).Create(t.Context(), in)
	var ae *apperr.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, apperr.ProviderUnavailable, ae.Code)
	a, err := attempts.Get(t.Context(), h.db.Pool, reply.PaymentID)
	require.NoError(t, err)
	require.Equal(t, attempts.Unknown, a.Status)
	hist, err := attempts.History(t.Context(), h.db.Pool, a.ID)
	require.NoError(t, err)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown}, hist)
}

// TestLockRenewedWhenTheCallStarts: a request whose way to the provider call
// was slowed by the database (here: a row lock held by another transaction
// for most of the lock TTL) still holds a lock of a whole TTL when the
// provider is called, so the lock cannot expire while it is calling.
func TestLockRenewedWhenTheCallStarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := t.Context()
	in := h.input("k-renew", "o-renew")
	// An UNKNOWN attempt with its key released, as a 202 leaves it.
	h.faults(`{"error_rate":1,"error_status":503}`)
	first, err := h.service(h.resilient(100)).Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, first.Code)
	h.faults(`{}`)

	// Hold the attempt's row lock for 2s of the 3s TTL: the resumed request
	// takes the key over, then waits here before it may call the provider.
	blocker, err := h.db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = blocker.Exec(ctx, `SELECT 1 FROM payment_attempts WHERE id = $1 FOR UPDATE`, first.PaymentID)
	require.NoError(t, err)

	var remaining atomic.Int64 // ms of lock left when the charge call arrived
	probe := func() {
		var ms float64
		err := h.db.Pool.QueryRow(context.Background(),
			`SELECT EXTRACT(EPOCH FROM locked_until - clock_timestamp()) * 1000 FROM idempotency_keys WHERE attempt_id = $1`,
			first.PaymentID).Scan(&ms)
		if err == nil {
			remaining.Store(int64(ms))
		}
	}
	h.beforeCharge.Store(&probe)

	done := make(chan payments.Reply, 1)
	errs := make(chan error, 1)
	go func() {
		reply, err := h.service(h.resilient(100)).Create(ctx, in)
		done <- reply
		errs <- err
	}()
	time.Sleep(2 * time.Second) // the slow database: not a wait for a condition
	require.NoError(t, blocker.Rollback(ctx))

	select {
	case reply := <-done:
		require.NoError(t, <-errs)
		require.Equal(t, http.StatusCreated, reply.Code)
	case <-time.After(30 * time.Second):
		t.Fatal("the resumed request did not finish")
	}
	// Without the renewal about 1s would be left (3s from the takeover, 2s
	// of which were spent waiting); with it, about the whole 3s.
	require.Greater(t, remaining.Load(), int64(2000), "ms of lock left at the call")
	require.Equal(t, 1, h.charges())
}

func jsonDecode(resp *http.Response, v any) error {
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
