package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/client"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
)

// bundle is a simulator and a paymentsvc pod on their database, and the
// checkout on a database of its own.
type bundle struct {
	sim      *proctest.Sim
	pod      *proctest.Process
	payments *testdb.DB
	tenant   proctest.Tenant
	shop     *testdb.DB
}

func setup(t *testing.T) *bundle {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real binaries; skipped with -short")
	}
	b := &bundle{payments: testdb.New(t), shop: testdb.New(t), sim: proctest.StartSim(t, proctest.SimOptions{})}
	b.tenant = proctest.CreateTenant(t, b.payments.URL, "shop")
	b.pod = proctest.StartPod(t, proctest.PodOptions{DatabaseURL: b.payments.URL, ProviderURL: b.sim.URL(), Env: []string{
		"IDEMPOTENCY_LOCK_TTL=3s", "PROVIDER_CALL_TIMEOUT=500ms", "PROVIDER_RETRY_BUDGET=1500ms", "PROVIDER_BREAKER_COOLDOWN=1s",
	}})
	return b
}

// checkout returns a checkout as a fresh process would build it (nothing
// in memory), whose payments client gives up after timeout; its transport
// records, at each try, the key sent and the key the order row held then.
func (b *bundle) checkout(t *testing.T, timeout time.Duration) (*Checkout, *keyLog) {
	t.Helper()
	log := &keyLog{next: http.DefaultTransport.(*http.Transport).Clone(), db: b.shop}
	payments, err := client.New(client.Config{
		URLs: []string{b.pod.URL()}, APIKey: b.tenant.APIKey, Timeout: timeout,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, HTTPClient: &http.Client{Transport: log},
	})
	require.NoError(t, err)
	t.Cleanup(payments.CloseIdleConnections)
	c := &Checkout{DB: b.shop.Pool.Pool, Payments: payments}
	require.NoError(t, c.Migrate(context.Background()))
	return c, log
}

// keysStored are the tenant's idempotency keys as the payments service holds them.
func (b *bundle) keysStored(t *testing.T) []string {
	t.Helper()
	return testdb.Strings[string](context.Background(), t, b.payments.Pool, "SELECT key FROM idempotency_keys WHERE tenant_id = $1 ORDER BY created_at", b.tenant.ID)
}

// keyLog is the payments client's transport in these tests.
type keyLog struct {
	next http.RoundTripper
	db   *testdb.DB
	mu   sync.Mutex
	sent []sentKey
}

type sentKey struct {
	key    string // the Idempotency-Key of the try
	stored string // the order row's payment_key when the try was sent
	status int
}

func (l *keyLog) RoundTrip(req *http.Request) (*http.Response, error) {
	k := sentKey{key: req.Header.Get("Idempotency-Key")}
	if k.key != "" {
		var order struct {
			OrderID string `json:"order_id"`
		}
		body, err := req.GetBody()
		if err == nil {
			_ = json.NewDecoder(body).Decode(&order)
		}
		_ = l.db.Pool.QueryRow(req.Context(), "SELECT coalesce(payment_key, '') FROM checkout_orders WHERE id = $1", order.OrderID).Scan(&k.stored)
	}
	resp, err := l.next.RoundTrip(req)
	if resp != nil {
		k.status = resp.StatusCode
	}
	l.mu.Lock()
	l.sent = append(l.sent, k)
	l.mu.Unlock()
	return resp, err
}

func (l *keyLog) tries() []sentKey {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]sentKey(nil), l.sent...)
}

// openOrder serves a checkout built as b.checkout builds it and opens order
// o-1 (500 USD) through it.
func (b *bundle) openOrder(t *testing.T, timeout time.Duration) (*httptest.Server, *keyLog) {
	t.Helper()
	c, log := b.checkout(t, timeout)
	srv := serve(t, c)
	status, _ := post(t, srv, "/orders", Order{ID: "o-1", Amount: 500, Currency: "USD"})
	require.Equal(t, http.StatusCreated, status)
	return srv, log
}

// post sends body to path on the checkout's handler and decodes the order.
func post(t *testing.T, srv *httptest.Server, path string, body any) (int, Order) {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var o Order
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
	return resp.StatusCode, o
}

func serve(t *testing.T, c *Checkout) *httptest.Server {
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// The key is in the order row before the first try, and it is the only key
// the service ever sees for the order.
func TestCheckoutStoresTheKeyBeforeTheFirstTry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv, log := b.openOrder(t, 30*time.Second)

	status, o := post(t, srv, "/orders/o-1/pay", map[string]string{"payment_method": "pm_card_visa"})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "paid", o.Status)
	require.NotNil(t, o.PaymentKey)
	tries := log.tries()
	require.Len(t, tries, 1)
	require.Equal(t, *o.PaymentKey, tries[0].key)
	require.Equal(t, tries[0].key, tries[0].stored, "the key was committed with the order before the first try")
	require.Equal(t, []string{*o.PaymentKey}, b.keysStored(t))
	require.Equal(t, 1, b.sim.SucceededChargesFor(t, *o.PaymentID))

	status, again := post(t, srv, "/orders/o-1/pay", map[string]string{"payment_method": "pm_card_visa"})
	require.Equal(t, http.StatusOK, status, "a paid order is answered as it is")
	require.Equal(t, o, again)
	require.Len(t, log.tries(), 1, "nothing sent for a paid order")
}

// The provider loses its answers: the customer gets "processing" (202) and
// the key stays in the order row. A fresh checkout process (nothing in
// memory) resumes the order with that key once the provider is back: the
// same payment, charged once; a second click with another card changes
// nothing.
func TestCheckoutResumesWithTheStoredKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv, log := b.openOrder(t, 4*time.Second)
	b.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true})

	status, o := post(t, srv, "/orders/o-1/pay", map[string]string{"payment_method": "pm_card_visa"})
	require.Equal(t, http.StatusAccepted, status, "processing")
	require.Equal(t, "open", o.Status)
	key := *o.PaymentKey

	b.sim.ClearFaults(t)
	restarted, log2 := b.checkout(t, time.Minute)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	n, err := restarted.ResumePending(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	paid, err := restarted.Order(ctx, "o-1")
	require.NoError(t, err)
	require.Equal(t, "paid", paid.Status)
	require.Equal(t, key, *paid.PaymentKey)

	status, again := post(t, serve(t, restarted), "/orders/o-1/pay", map[string]string{"payment_method": "pm_card_declined"})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, *paid, again)

	for _, tr := range append(log.tries(), log2.tries()...) {
		require.Equal(t, key, tr.key, "every try of the order carried its one key")
		require.Equal(t, key, tr.stored)
	}
	require.Equal(t, []string{key}, b.keysStored(t))
	require.Len(t, b.sim.Charges(t), 1, "exactly one charge")
}

// A decline ends the intent: the key is cleared, and the next attempt with
// another card is a new intent with a new key.
func TestCheckoutDeclineStartsANewIntent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv, _ := b.openOrder(t, 30*time.Second)

	status, declined := post(t, srv, "/orders/o-1/pay", map[string]string{"payment_method": "pm_card_declined"})
	require.Equal(t, http.StatusPaymentRequired, status)
	require.Equal(t, "open", declined.Status)
	require.Nil(t, declined.PaymentKey, "the declined intent is over")
	require.Equal(t, "card_declined", *declined.FailureCode)

	status, paid := post(t, srv, "/orders/o-1/pay", map[string]string{"payment_method": "pm_card_visa"})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "paid", paid.Status)
	keys := b.keysStored(t)
	require.Len(t, keys, 2, "two intents, two keys")
	require.Equal(t, *paid.PaymentKey, keys[1])
	require.Equal(t, 1, b.sim.SucceededChargesFor(t, *paid.PaymentID))

	status, _ = post(t, srv, "/orders/o-2/pay", map[string]string{"payment_method": "pm_card_visa"})
	require.Equal(t, http.StatusNotFound, status)
}
