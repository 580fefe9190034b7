package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// whTimeout is the pods' MERCHANT_WEBHOOK_TIMEOUT in these tests: a claim
// lapses 5 × it + 10 s after a pod died holding it.
const whTimeout = "2s"

// whPodEnv are the settings of a pod that delivers merchant webhooks to the
// tests' local receivers: the relay on (the fan-out runs in it), http://
// and loopback allowed, a short timeout and retry schedule.
func whPodEnv(extra ...string) []string {
	return append([]string{
		"OUTBOX_RELAY=on", "NATS_URL=" + testkit.NATSURL(),
		"MERCHANT_WEBHOOK_ALLOW_HTTP=true", "MERCHANT_WEBHOOK_ALLOW_PRIVATE=true",
		"MERCHANT_WEBHOOK_TIMEOUT=" + whTimeout, "MERCHANT_WEBHOOK_RETRY_SCHEDULE=200ms,200ms,200ms",
	}, extra...)
}

// whStack is a database with a tenant, a simulator and a merchant's
// receiver, to which each test adds its pods.
type whStack struct {
	db     *testdb.DB
	sim    *proctest.Sim
	tenant proctest.Tenant
	rc     *whReceiver
}

func newWHStack(t *testing.T, answer func(*http.Request) int) *whStack {
	t.Helper()
	d := testdb.New(t)
	return &whStack{
		db: d, sim: proctest.StartSim(t, proctest.SimOptions{}),
		tenant: proctest.CreateTenant(t, d.URL, "merchant"), rc: newWHReceiver(t, answer),
	}
}

func (s *whStack) pod(t *testing.T, name string, env ...string) (*proctest.Process, *proctest.Client) {
	t.Helper()
	p := proctest.StartPod(t, proctest.PodOptions{Name: name, DatabaseURL: s.db.URL, ProviderURL: s.sim.URL(), Env: whPodEnv(env...)})
	return p, proctest.NewClient(p.URL(), s.tenant.APIKey)
}

// endpoint creates an endpoint for the receiver through c and returns its
// id and secret, which the receiver verifies with from then on.
func (s *whStack) endpoint(t *testing.T, c *proctest.Client) (id, secret string) {
	t.Helper()
	r := c.MustDo(t, http.MethodPost, "/v1/webhook_endpoints", []byte(`{"url":"`+s.rc.URL+`/hooks"}`),
		map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	s.rc.setSecret(t, r.Str("secret"))
	return r.Str("id"), r.Str("secret")
}

// succeeded seeds n SUCCEEDED payments of the tenant, each with its
// PaymentSucceeded outbox row as the service writes it, for the pods'
// relays to publish, and returns their ids.
func (s *whStack) succeeded(t *testing.T, n int) []string {
	t.Helper()
	return testdb.Attempts(t, s.db.Pool, testdb.AttemptsOpts{
		TenantID: s.tenant.ID, Prefix: testkit.RandomID("pay_") + "_", N: n,
		Statuses: []attempts.Status{attempts.Succeeded}, Outbox: true,
	})
}

// count runs a count query on the stack's database.
func (s *whStack) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.Pool.QueryRow(t.Context(), query, args...).Scan(&n))
	return n
}

// whReceiver is a merchant's endpoint: it verifies every request with the
// official Standard Webhooks library and counts each event id it got.
type whReceiver struct {
	*httptest.Server
	answer func(*http.Request) int // nil: 200

	mu       sync.Mutex
	verifier *standardwebhooks.Webhook
	got      map[string]int   // the data's id (a payment's, a refund's) → requests accepted
	bodies   []map[string]any // of the requests accepted
	bad      []string         // webhook-ids of requests that did not verify
}

func newWHReceiver(t *testing.T, answer func(*http.Request) int) *whReceiver {
	t.Helper()
	rc := &whReceiver{answer: answer, got: map[string]int{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *whReceiver) setSecret(t *testing.T, secret string) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.verifier = wh
}

func (rc *whReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	status := http.StatusOK
	if rc.answer != nil {
		status = rc.answer(r)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var ev map[string]any
	if rc.verifier == nil || rc.verifier.Verify(body, r.Header) != nil || json.Unmarshal(body, &ev) != nil || ev["id"] != r.Header.Get("webhook-id") {
		rc.bad = append(rc.bad, r.Header.Get("webhook-id"))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if status < 300 {
		data, _ := ev["data"].(map[string]any)
		id, _ := data["id"].(string)
		rc.got[id]++
		rc.bodies = append(rc.bodies, ev)
	}
	w.WriteHeader(status)
}

// accepted are the bodies of the requests the receiver accepted.
func (rc *whReceiver) accepted() []map[string]any {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]map[string]any(nil), rc.bodies...)
}

// tally is what the receiver accepted: distinct payments, and requests in all.
func (rc *whReceiver) tally() (distinct, accepted int, bad []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, n := range rc.got {
		accepted += n
	}
	return len(rc.got), accepted, append([]string(nil), rc.bad...)
}

func (rc *whReceiver) requireEach(t *testing.T, payments []string) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, p := range payments {
		require.GreaterOrEqual(t, rc.got[p], 1, "payment %s delivered", p)
	}
	require.Empty(t, rc.bad, "requests that did not verify")
}

// TestMerchantWebhooksPodKilledMidBacklog kills the one delivering pod
// (SIGKILL) in the middle of a backlog: after its restart every event is
// delivered, the deliveries it held included (their claims lapse), and no
// delivery is left pending.
func TestMerchantWebhooksPodKilledMidBacklog(t *testing.T) {
	t.Parallel()
	// A slow receiver, and two attempts at a time, make a backlog that
	// takes seconds to drain.
	s := newWHStack(t, func(*http.Request) int {
		time.Sleep(20 * time.Millisecond) // the receiver's own work, not a wait for a condition
		return http.StatusOK
	})
	pod, c := s.pod(t, "wh-pod", "MERCHANT_WEBHOOK_ENDPOINT_CONCURRENCY=2")
	s.endpoint(t, c)
	const n = 300
	payments := s.succeeded(t, n)

	testkit.Eventually(t, 2*time.Minute, "the backlog half way", func() bool {
		distinct, _, _ := s.rc.tally()
		return distinct >= n/3
	})
	pod.Kill()
	before, _, _ := s.rc.tally()
	require.Less(t, before, n, "killed mid-backlog")
	pod.Restart()

	testkit.Eventually(t, 3*time.Minute, "every event delivered after the restart", func() bool {
		distinct, _, _ := s.rc.tally()
		return distinct == n
	})
	s.rc.requireEach(t, payments)
	testkit.Eventually(t, time.Minute, "every delivery recorded delivered", func() bool {
		return s.count(t, `SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`) == n
	})
	require.Equal(t, n, s.count(t, `SELECT count(*) FROM webhook_deliveries`))
	_, accepted, _ := s.rc.tally()
	t.Logf("%d events, %d delivered before the kill, %d requests accepted: %d duplicates (attempts the dead pod made but never recorded)",
		n, before, accepted, accepted-n)
}

// TestMerchantWebhooksTwoPods: two pods relay and deliver together; every
// event is delivered, and every request the receiver got is an attempt the
// pods recorded (the duplicates, if any, are counted and logged).
func TestMerchantWebhooksTwoPods(t *testing.T) {
	t.Parallel()
	s := newWHStack(t, nil)
	_, c := s.pod(t, "wh-pod-a", "MERCHANT_WEBHOOK_ENDPOINT_CONCURRENCY=2")
	s.pod(t, "wh-pod-b", "MERCHANT_WEBHOOK_ENDPOINT_CONCURRENCY=2")
	s.endpoint(t, c)
	const n = 200
	payments := s.succeeded(t, n)

	testkit.Eventually(t, 2*time.Minute, "every event delivered", func() bool {
		return s.count(t, `SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`) == n
	})
	s.rc.requireEach(t, payments)
	distinct, accepted, _ := s.rc.tally()
	require.Equal(t, n, distinct)
	require.Equal(t, accepted, s.count(t, `SELECT sum(attempts) FROM webhook_deliveries`), "every request an attempt recorded")
	t.Logf("%d events delivered by two pods with %d requests: %d duplicates", n, accepted, accepted-n)
}

// TestMerchantWebhooksOff: a pod with MERCHANT_WEBHOOKS=off serves the
// endpoints API, and its relay fans events out, but it makes no attempt:
// the pod beside it with the default makes them all.
func TestMerchantWebhooksOff(t *testing.T) {
	t.Parallel()
	s := newWHStack(t, nil)
	off, offClient := s.pod(t, "wh-off", "MERCHANT_WEBHOOKS=off")
	id, _ := s.endpoint(t, offClient)
	got := offClient.MustGet(t, "/v1/webhook_endpoints/"+id)
	require.Equal(t, http.StatusOK, got.Status, "%s", got)
	_, onClient := s.pod(t, "wh-on")
	const n = 40
	payments := s.succeeded(t, n)

	testkit.Eventually(t, 2*time.Minute, "every event delivered", func() bool {
		r := offClient.MustGet(t, "/v1/webhook_endpoints/"+id+"/deliveries?limit=100")
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		delivered := 0
		for _, d := range r.JSON["data"].([]any) {
			if d.(map[string]any)["status"] == "delivered" {
				delivered++
			}
		}
		return delivered == n
	})
	s.rc.requireEach(t, payments)
	offMetrics, onMetrics := scrapeMetrics(t, offClient), scrapeMetrics(t, onClient)
	require.Zero(t, offMetrics.value("paymentsvc_merchant_webhook_attempts_total", opsLabels("result", "success")), "the off pod made no attempt")
	_, accepted, _ := s.rc.tally()
	require.EqualValues(t, accepted, onMetrics.value("paymentsvc_merchant_webhook_attempts_total", opsLabels("result", "success")))
	for _, l := range opsLogLines(off) {
		require.NotEqual(t, "merchant webhooks delivering", l.str("msg"), "the off pod runs no deliverer")
	}
	require.Contains(t, off.Logs(), `"merchant_webhooks":false`)
}

// TestMerchantWebhooksOfARealPayment: a payment made through the API (the
// simulator charges it) reaches the merchant's endpoint as payment.succeeded,
// and its refund as refund.succeeded, each with its data as the API shows
// it plus tenant_id; an endpoint subscribed to refunds only gets the refund.
func TestMerchantWebhooksOfARealPayment(t *testing.T) {
	t.Parallel()
	s := newWHStack(t, nil)
	_, c := s.pod(t, "wh-pod")
	s.endpoint(t, c)
	refunds := newWHReceiver(t, nil)
	r := c.MustDo(t, http.MethodPost, "/v1/webhook_endpoints", []byte(`{"url":"`+refunds.URL+`","event_types":["refund.succeeded"]}`),
		map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	refunds.setSecret(t, r.Str("secret"))

	pay := c.MustPay(t, "wh-real-1", apiclient.Visa("o-wh-1", 700))
	require.Equal(t, http.StatusCreated, pay.Status, "%s", pay)
	refund := c.MustDo(t, http.MethodPost, "/v1/payments/"+pay.Str("id")+"/refunds", []byte(`{"amount":200}`),
		map[string]string{"Content-Type": "application/json", "Idempotency-Key": "wh-real-r1"})
	require.Equal(t, http.StatusCreated, refund.Status, "%s", refund)
	testkit.Eventually(t, time.Minute, "the payment and its refund at the first endpoint, the refund at the second", func() bool {
		all, _, _ := s.rc.tally()
		some, _, _ := refunds.tally()
		return all == 2 && some == 1
	})
	s.rc.requireEach(t, []string{pay.Str("id"), refund.Str("id")})
	refunds.requireEach(t, []string{refund.Str("id")})
	byType := map[string]map[string]any{}
	for _, ev := range s.rc.accepted() {
		require.True(t, strings.HasPrefix(ev["id"].(string), "evt_"))
		byType[ev["type"].(string)] = ev["data"].(map[string]any)
	}
	paid := byType["payment.succeeded"]
	require.Equal(t, pay.Str("id"), paid["id"])
	require.Equal(t, s.tenant.ID, paid["tenant_id"])
	require.Equal(t, "SUCCEEDED", paid["status"])
	require.EqualValues(t, 700, paid["amount"])
	refunded := byType["refund.succeeded"]
	require.Equal(t, refund.Str("id"), refunded["id"])
	require.Equal(t, pay.Str("id"), refunded["payment_id"])
	require.Equal(t, s.tenant.ID, refunded["tenant_id"])
	require.EqualValues(t, 200, refunded["amount"])
	require.EqualValues(t, 200, refunded["amount_refunded"])
	require.Equal(t, "refund.succeeded", refunds.accepted()[0]["type"])
}
