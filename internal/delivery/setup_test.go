package delivery_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// bundle is one test's database, tenant and endpoints API.
type bundle struct {
	t         testing.TB
	db        *testdb.DB
	tenant    string
	endpoints *delivery.Endpoints
}

func setup(t testing.TB) *bundle {
	t.Helper()
	d := testdb.New(t)
	tn := testdb.Tenant(t, d.Pool, testdb.TenantOpts{})
	return &bundle{t: t, db: d, tenant: tn.ID, endpoints: delivery.NewEndpoints(d.Pool, delivery.EndpointsConfig{
		AllowHTTP: true, Keys: idempotency.Config{LockTTL: 30 * time.Second, KeyTTL: time.Hour},
	})}
}

// fastConfig is a deliverer's configuration for tests: local receivers
// allowed, short timeout and schedule, quick polls.
func fastConfig() delivery.Config {
	return delivery.Config{
		Timeout: 5 * time.Second, Schedule: []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
		PollInterval: 50 * time.Millisecond, AllowPrivate: true, AllowHTTP: true, ShutdownGrace: time.Second,
	}
}

// deliver runs a deliverer with cfg until the test ends (or stop is called).
func (b *bundle) deliver(cfg delivery.Config) (stop func()) {
	b.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(b.t)
	}
	d, err := delivery.NewDeliverer(b.db.Pool, cfg)
	require.NoError(b.t, err)
	return testkit.Background(b.t, d.Run)
}

// endpoint creates an endpoint of the bundle's tenant for url, subscribed
// to types (none: every type), and returns it with its secret.
func (b *bundle) endpoint(url string, types ...string) delivery.WithSecret {
	b.t.Helper()
	return b.endpointOf(b.tenant, url, types...)
}

func (b *bundle) endpointOf(tenant, url string, types ...string) delivery.WithSecret {
	b.t.Helper()
	n := delivery.New{TenantID: tenant, URL: url}
	if len(types) > 0 {
		n.EventTypes = types
	}
	reply, err := b.endpoints.Create(context.Background(), delivery.CreateRequest{New: n})
	require.NoError(b.t, err)
	require.Equal(b.t, http.StatusCreated, reply.Code)
	var ws delivery.WithSecret
	require.NoError(b.t, json.Unmarshal(reply.Body, &ws))
	return ws
}

// event is an event of the outbox as the relay hands it to the fan-out.
type event struct {
	typ       string // the CloudEvents type; default PaymentSucceeded
	tenant    string // default the bundle's
	createdAt time.Time
}

// publish fans events out as the relay does after publishing them, in one
// transaction, and returns their ids.
func (b *bundle) publish(events ...event) []string {
	b.t.Helper()
	ids := make([]string, len(events))
	for i := range events {
		ids[i] = testkit.RandomID("evt_")
	}
	b.fanOut(ids, events)
	return ids
}

// republish fans out again the events ids, published before, as a relay
// that crashed before marking them does.
func (b *bundle) republish(ids ...string) {
	b.t.Helper()
	b.fanOut(ids, make([]event, len(ids)))
}

func (b *bundle) fanOut(ids []string, events []event) {
	b.t.Helper()
	pubs := make([]outbox.Published, len(events))
	now := b.now()
	for i, e := range events {
		if e.typ == "" {
			e.typ = outbox.TypePaymentSucceeded
		}
		if e.tenant == "" {
			e.tenant = b.tenant
		}
		if e.createdAt.IsZero() {
			e.createdAt = now
		}
		payment := "pay_" + strings.TrimPrefix(ids[i], "evt_")
		data, err := json.Marshal(map[string]any{"id": payment, "tenant_id": e.tenant, "status": "SUCCEEDED", "amount": 500})
		require.NoError(b.t, err)
		pubs[i] = outbox.Published{ID: ids[i], Type: e.typ, PaymentID: payment, Payload: data, CreatedAt: e.createdAt}
	}
	fan := delivery.NewFanout(nil)
	require.NoError(b.t, db.WithTx(context.Background(), b.db.Pool, func(tx pgx.Tx) error {
		return fan(context.Background(), tx, pubs)
	}))
}

// otherTenant seeds another tenant and returns its id.
func (b *bundle) otherTenant() string {
	b.t.Helper()
	return testdb.Tenant(b.t, b.db.Pool, testdb.TenantOpts{Name: "other shop"}).ID
}

// publishN publishes n PaymentSucceeded events of the bundle's tenant.
func (b *bundle) publishN(n int) []string {
	b.t.Helper()
	evs := make([]event, n)
	return b.publish(evs...)
}

// now is the database's clock.
func (b *bundle) now() time.Time {
	b.t.Helper()
	var now time.Time
	require.NoError(b.t, b.db.Pool.QueryRow(context.Background(), "SELECT now()").Scan(&now))
	return now
}

// deliveries are the deliveries of endpoint, newest first.
func (b *bundle) deliveries(endpoint string) []delivery.Delivery {
	b.t.Helper()
	list, _, err := b.endpoints.Deliveries(context.Background(), b.tenant, endpoint, "", 100)
	require.NoError(b.t, err)
	return list
}

// waitStatus waits until every delivery of endpoint is in status, and
// there are n of them.
func (b *bundle) waitStatus(endpoint string, n int, status string, timeout time.Duration) []delivery.Delivery {
	b.t.Helper()
	var list []delivery.Delivery
	testkit.Eventually(b.t, timeout, "deliveries of "+endpoint+" "+status, func() bool {
		list = b.deliveries(endpoint)
		if len(list) != n {
			return false
		}
		for _, d := range list {
			if d.Status != status {
				return false
			}
		}
		return true
	})
	return list
}

// firstAttempt waits for the first attempt of the one delivery of endpoint
// and returns the delivery then.
func (b *bundle) firstAttempt(endpoint string) delivery.Delivery {
	b.t.Helper()
	var d delivery.Delivery
	testkit.Eventually(b.t, 30*time.Second, "the first attempt to "+endpoint, func() bool {
		list := b.deliveries(endpoint)
		if len(list) == 0 {
			return false
		}
		d = list[0]
		return d.Attempts >= 1
	})
	require.Len(b.t, b.deliveries(endpoint), 1)
	return d
}

// count runs a count query.
func (b *bundle) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is a merchant's endpoint for tests: it records every request
// and answers with the status answer gives (200 when nil), whose argument
// counts the requests so far from 1.
type receiver struct {
	*httptest.Server
	answer func(n int) int

	mu   sync.Mutex
	reqs []received
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, received{header: r.Header.Clone(), body: body, at: time.Now()})
	n := len(rc.reqs)
	rc.mu.Unlock()
	status := http.StatusOK
	if rc.answer != nil {
		status = rc.answer(n)
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"received":true}`))
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.reqs...)
}

// requireVerified checks r's signature with the official Standard Webhooks
// library and secret, and returns its body's event.
func requireVerified(t *testing.T, secret string, r received) map[string]any {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(r.body, r.header), "signature of %s", r.header.Get("webhook-id"))
	var ev map[string]any
	require.NoError(t, json.Unmarshal(r.body, &ev))
	return ev
}

// testLogger logs warnings and errors through t, so a failing test shows
// what the deliverer saw.
func testLogger(t testing.TB) *slog.Logger { return testkit.Logger(t) }
