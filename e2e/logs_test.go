package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// onlyRequestLine waits for the one "request" log line of request id and
// requires that there is exactly one.
func onlyRequestLine(t *testing.T, p *proctest.Process, id string) opsLogLine {
	t.Helper()
	var lines []opsLogLine
	testkit.Eventually(t, 30*time.Second, "the request line of "+id+" is logged", func() bool {
		lines = opsRequestLines(p, id)
		return len(lines) > 0
	})
	require.Len(t, lines, 1, "one request line for %s", id)
	return lines[0]
}

// requireRequestLine checks the fields every request line carries.
func requireRequestLine(t *testing.T, l opsLogLine, method, route string, status int) {
	t.Helper()
	require.Equal(t, "INFO", l.str("level"), "%v", l)
	require.Equal(t, method, l.str("method"), "%v", l)
	require.Equal(t, route, l.str("route"), "%v", l)
	require.EqualValues(t, status, l["status"], "%v", l)
	d, ok := l["duration_ms"].(float64)
	require.True(t, ok && d >= 0, "duration_ms is a number: %v", l)
	require.NotEmpty(t, l.str("path"), "%v", l)
}

var generatedRequestID = regexp.MustCompile(`^req_[0-9a-f]+$`)

// Every request gets one JSON log line (msg "request") with its request id
// (the caller's X-Request-Id when it is sane, generated otherwise, and
// always echoed), status, duration, and the tenant and payment it concerned.
func TestRequestLogLines(t *testing.T) {
	t.Parallel()
	s := setupOps(t, opsOptions{})
	with := func(id string, h map[string]string) map[string]string {
		out := map[string]string{"X-Request-Id": id}
		for k, v := range h {
			out[k] = v
		}
		return out
	}

	// A create: tenant and payment, and the caller's id echoed.
	r := s.client.MustDo(t, http.MethodPost, "/v1/payments", []byte(`{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`),
		with("log-create-1", map[string]string{"Idempotency-Key": "log-1", "Content-Type": "application/json"}))
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, "log-create-1", r.Header.Get("X-Request-Id"))
	id, chargeID := r.Str("id"), r.Str("provider_charge_id")
	l := onlyRequestLine(t, s.pod, "log-create-1")
	requireRequestLine(t, l, http.MethodPost, "/v1/payments", 201)
	require.Equal(t, s.tenant.ID, l.str("tenant_id"), "%v", l)
	require.Equal(t, id, l.str("payment_id"), "%v", l)

	// A replay names the payment too.
	r = s.client.MustDo(t, http.MethodPost, "/v1/payments", []byte(`{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`),
		with("log-replay-1", map[string]string{"Idempotency-Key": "log-1", "Content-Type": "application/json"}))
	require.True(t, r.Replayed())
	l = onlyRequestLine(t, s.pod, "log-replay-1")
	require.Equal(t, id, l.str("payment_id"), "%v", l)

	// A read: the route pattern, the path, the payment.
	r = s.client.MustDo(t, http.MethodGet, "/v1/payments/"+id, nil, with("log-get-1", nil))
	require.Equal(t, 200, r.Status)
	l = onlyRequestLine(t, s.pod, "log-get-1")
	requireRequestLine(t, l, http.MethodGet, "/v1/payments/{id}", 200)
	require.Equal(t, "/v1/payments/"+id, l.str("path"))
	require.Equal(t, s.tenant.ID, l.str("tenant_id"))
	require.Equal(t, id, l.str("payment_id"))

	// Refused before a tenant is known: no tenant_id.
	r = s.anon.MustDo(t, http.MethodGet, "/v1/payments/"+id, nil, with("log-401-1", nil))
	require.Equal(t, 401, r.Status)
	l = onlyRequestLine(t, s.pod, "log-401-1")
	requireRequestLine(t, l, http.MethodGet, "/v1/payments/{id}", 401)
	require.NotContains(t, l, "tenant_id")
	require.NotContains(t, l, "payment_id")

	// A webhook and an unknown endpoint are logged too.
	r = s.postWebhook(t, "", []byte(`{}`), map[string]string{"X-Request-Id": "log-hook-1"})
	require.Equal(t, 401, r.Status)
	requireRequestLine(t, onlyRequestLine(t, s.pod, "log-hook-1"), http.MethodPost, "/v1/webhooks/{provider}", 401)
	// An applied webhook names its payment on its request line.
	charge := providersim.Charge{ID: chargeID, Amount: 500, Currency: "USD", Status: providersim.StatusSucceeded,
		Reference: id, IdempotencyKey: attempts.ProviderKey(id), Created: time.Now().Unix()}
	r = s.postWebhook(t, s.secret, opsEvent("evt_log_1", providersim.EventChargeSucceeded, charge), map[string]string{"X-Request-Id": "log-hook-2"})
	require.Equal(t, 200, r.Status, "%s", r)
	l = onlyRequestLine(t, s.pod, "log-hook-2")
	requireRequestLine(t, l, http.MethodPost, "/v1/webhooks/{provider}", 200)
	require.Equal(t, id, l.str("payment_id"), "%v", l)
	r = s.anon.MustDo(t, http.MethodGet, "/nowhere", nil, with("log-404-1", nil))
	require.Equal(t, 404, r.Status)
	requireRequestLine(t, onlyRequestLine(t, s.pod, "log-404-1"), http.MethodGet, "unmatched", 404)

	// No X-Request-Id, or one that is not sane: a generated id, echoed and logged.
	for _, sent := range []string{"", "has spaces", "quote\"d", strings.Repeat("x", 129)} {
		h := map[string]string{}
		if sent != "" {
			h["X-Request-Id"] = sent
		}
		r = s.anon.MustDo(t, http.MethodGet, "/healthz", nil, h)
		require.Equal(t, 200, r.Status)
		got := r.Header.Get("X-Request-Id")
		require.Regexp(t, generatedRequestID, got, "X-Request-Id %q is replaced", sent)
		requireRequestLine(t, onlyRequestLine(t, s.pod, got), http.MethodGet, "/healthz", 200)
		if sent != "" {
			require.Empty(t, opsRequestLines(s.pod, sent), "the refused id %q is not logged as a request id", sent)
		}
	}
	// A sane id of the longest length is kept.
	long := strings.Repeat("a", 128)
	r = s.anon.MustDo(t, http.MethodGet, "/healthz", nil, with(long, nil))
	require.Equal(t, long, r.Header.Get("X-Request-Id"))
	onlyRequestLine(t, s.pod, long)
}

// A whole run's logs (creates, replays, declines, errors, provider
// failures, webhooks good and bad) never contain a credential: the tenant's
// API key (nor a wrong one a caller sent), the provider API key, the
// webhook secret or a signature made with it, the database password, or the
// payment-method token.
func TestLogsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	var (
		providerKey = testkit.RandomID("sk_prov_")
		secret      = testkit.RandomID("whsec_")
		dbPassword  = testkit.RandomID("dbpw")
		token       = testkit.RandomID("pm_tok_")
		wrongKey    = testkit.RandomID("sk_wrong_")
	)
	s := setupOps(t, opsOptions{
		secret:   secret,
		webhooks: true,
		simEnv:   []string{"SIM_API_KEY=" + providerKey},
		podEnv: []string{
			"PROVIDER_API_KEY=" + providerKey,
			"PROVIDER_CALL_TIMEOUT=2s", "PROVIDER_RETRY_BUDGET=1s", "IDEMPOTENCY_LOCK_TTL=10s",
			// The breaker must not open during the injected 500s: this test is about logs.
			"PROVIDER_BREAKER_FAILURES=1000",
		},
		// With the server's trust authentication the password is not
		// checked, but it is in the URL the pod is given (userinfo and query).
		podDatabaseURL: func(u string) string {
			u = strings.Replace(u, "postgres://postgres@", "postgres://postgres:"+dbPassword+"@", 1)
			return u + "&password=" + dbPassword
		},
	})
	c := s.client
	pay := func(key, order, pm string) apiclient.Response {
		return c.MustPay(t, key, apiclient.Payment{OrderID: order, Amount: 500, Currency: "USD", PaymentMethod: pm})
	}
	ok := pay("sec-1", "o-1", token)
	require.Equal(t, 201, ok.Status, "%s", ok)
	require.True(t, pay("sec-1", "o-1", token).Replayed())
	require.Equal(t, 422, pay("sec-1", "o-1", "pm_card_visa").Status)
	require.Equal(t, 402, pay("sec-2", "o-2", "pm_card_declined").Status)
	require.Equal(t, 401, proctest.NewClient(s.pod.URL(), wrongKey).MustPay(t, "sec-3", apiclient.Visa("o-3", 500)).Status)
	require.Equal(t, 400, c.MustDo(t, http.MethodPost, "/v1/payments", []byte(`{"order_id":"o-4","payment_method":"`+token+`","coupon":"`+token+`"}`),
		map[string]string{"Idempotency-Key": "sec-4", "Content-Type": "application/json"}).Status)
	require.Equal(t, 404, c.MustGet(t, "/v1/payments/pay_nobody").Status)
	// Provider failures are logged with their errors.
	s.sim.SetFaults(t, providersim.Faults{ErrorRate: 1, ErrorStatus: 500})
	require.Equal(t, 202, pay("sec-5", "o-5", token).Status)
	s.sim.ClearFaults(t)
	require.Equal(t, 201, pay("sec-5", "o-5", token).Status, "resumed")

	// Webhooks: the simulator's real deliveries, then refused ones signed
	// with the real secret.
	testkit.Eventually(t, time.Minute, "the simulator's webhooks are applied", func() bool {
		return strings.Count(s.pod.Logs(), `"msg":"webhook received"`) >= 3
	})
	charge := providersim.Charge{ID: "ch_sec", Amount: 500, Currency: "USD", Status: providersim.StatusSucceeded, Reference: ok.Str("id"), PaymentMethod: token}
	body := opsEvent("evt_sec_1", providersim.EventChargeSucceeded, charge)
	stale := providersim.SignatureHeader(secret, time.Now().Add(-time.Hour).Unix(), body)
	require.Equal(t, 401, s.postWebhook(t, "", body, map[string]string{"Sim-Signature": stale}).Status)
	require.Equal(t, 401, s.postWebhook(t, "", body, map[string]string{"Sim-Signature": "t=1,v1=" + secret}).Status)
	require.Equal(t, 400, s.postWebhook(t, secret, []byte(`{"id":"evt_sec_2","type":"charge.nope","data":{"charge":{"id":"ch_sec","payment_method":"`+token+`"}}}`), nil).Status)
	require.Equal(t, 200, s.postWebhook(t, secret, body, nil).Status)

	logs := s.pod.Logs()
	require.Contains(t, logs, `"msg":"request"`, "the run was logged")
	require.Contains(t, logs, ok.Str("id"), "the run was logged")
	for name, v := range map[string]string{
		"the tenant's API key": s.tenant.APIKey, "a wrong API key": wrongKey, "the provider API key": providerKey,
		"the webhook secret": secret, "a webhook signature": stale[strings.Index(stale, "v1=")+3:],
		"the database password": dbPassword, "the payment-method token": token,
	} {
		require.False(t, strings.Contains(logs, v), "the pod's logs contain %s", name)
	}
	require.NotContains(t, strings.ToLower(logs), "bearer ", "no Authorization header is logged")
}
