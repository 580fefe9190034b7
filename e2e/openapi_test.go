package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	apispec "github.com/acme/paymentsvc/api"
	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// rejected marks a request the document must refuse (see headerSpecRejects).
func rejected(h map[string]string) map[string]string {
	out := map[string]string{headerSpecRejects: "1"}
	for k, v := range h {
		out[k] = v
	}
	return out
}

// TestOpenAPIMatchesRealTraffic runs the API's flows against a real pod and
// simulator, and validates every request and every response (the
// simulator's webhooks included) against api/openapi.yaml, so that the
// document cannot drift from the code. Requests the service must refuse are
// sent marked, and the document must refuse them too. Every documented
// response but the 500s must be seen.
//
// The pod has one provider, the default "sim" (its webhooks arrive at
// /v1/webhooks/sim, one path of /v1/webhooks/{provider}), whose webhook
// secret is its own (WEBHOOK_SECRETS_SIM), not WEBHOOK_SECRETS.
func TestOpenAPIMatchesRealTraffic(t *testing.T) {
	t.Parallel()
	v := newSpecValidator(t, nil)
	hooks := newSpecValidator(t, nil) // the simulator's deliveries
	simSecret := testkit.RandomID("whsec_sim_")
	s := setupOps(t, opsOptions{
		podEnv: []string{
			// A slow charge (5s, see in_use) fits one call; two failed calls
			// open the breaker, which stays open 2s.
			"PROVIDER_CALL_TIMEOUT=10s", "PROVIDER_RETRY_BUDGET=5s", "IDEMPOTENCY_LOCK_TTL=30s",
			"PROVIDER_BREAKER_FAILURES=2", "PROVIDER_BREAKER_COOLDOWN=2s",
			// The provider's own secret replaces WEBHOOK_SECRETS for it.
			"WEBHOOK_SECRETS=whsec_of_no_provider", "WEBHOOK_SECRETS_SIM=" + simSecret,
		},
		secret:        simSecret,
		webhooks:      true,
		hookTransport: hooks,
		transport:     v.wrap,
	})
	c, anon := s.client, s.anon
	pay := func(key, body string, h map[string]string) apiclient.Response {
		t.Helper()
		headers := map[string]string{"Content-Type": "application/json"}
		if key != "" {
			headers["Idempotency-Key"] = key
		}
		for k, val := range h {
			headers[k] = val
		}
		return c.MustDo(t, http.MethodPost, "/v1/payments", []byte(body), headers)
	}
	get := func(cl *proctest.Client, path string, h map[string]string) apiclient.Response {
		t.Helper()
		return cl.MustDo(t, http.MethodGet, path, nil, h)
	}

	// Operations endpoints.
	require.Equal(t, 200, get(anon, "/healthz", nil).Status)
	require.Equal(t, 200, get(anon, "/readyz", nil).Status)
	require.Equal(t, 200, get(anon, "/metrics", nil).Status)
	doc := get(anon, "/openapi.yaml", nil)
	require.Equal(t, 200, doc.Status)
	require.True(t, bytes.Equal(apispec.OpenAPI, doc.Raw), "/openapi.yaml serves api/openapi.yaml")

	// 201, and its replays (also of a reordered body, and of the quoted key form).
	first := pay("oa-1", `{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa","description":"first order","metadata":{"cart":"c-1"}}`, nil)
	require.Equal(t, 201, first.Status, "%s", first)
	require.Equal(t, "SUCCEEDED", first.Str("status"))
	require.False(t, first.Replayed())
	id := first.Str("id")
	again := pay("oa-1", `{"metadata":{"cart":"c-1"},"description":"first order","payment_method":"pm_card_visa","currency":"USD","amount":500,"order_id":"o-1"}`, nil)
	require.Equal(t, 201, again.Status, "%s", again)
	require.True(t, again.Replayed())
	require.JSONEq(t, string(first.Raw), string(again.Raw))
	quoted := pay(`"oa-1"`, `{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa","description":"first order","metadata":{"cart":"c-1"}}`, nil)
	require.True(t, quoted.Status == 201 && quoted.Replayed(), "%s", quoted)

	// 422: same key, different request; 409: the order is paid under another key.
	require.NoError(t, pay("oa-1", `{"order_id":"o-1","amount":501,"currency":"USD","payment_method":"pm_card_visa"}`, nil).CheckProblem(422, "idempotency_key_reused"))
	conflict := pay("oa-other", `{"order_id":"o-1","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`, nil)
	require.NoError(t, conflict.CheckProblem(409, "order_already_has_payment"))
	require.Equal(t, id, conflict.Str("payment_id"))
	require.Empty(t, conflict.Header.Get("Retry-After"))

	// 402 and its replay.
	declined := pay("oa-2", `{"order_id":"o-2","amount":700,"currency":"EUR","payment_method":"pm_card_declined"}`, nil)
	require.Equal(t, 402, declined.Status, "%s", declined)
	require.Equal(t, "FAILED", declined.Str("status"))
	require.Equal(t, declineCode(t), declined.Str("failure_code"))
	redeclined := pay("oa-2", `{"order_id":"o-2","amount":700,"currency":"EUR","payment_method":"pm_card_declined"}`, nil)
	require.True(t, redeclined.Status == 402 && redeclined.Replayed(), "%s", redeclined)

	// 400s, each also refused by the document.
	visa := `{"order_id":"o-3","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`
	require.NoError(t, pay("", visa, rejected(nil)).CheckProblem(400, "idempotency_key_missing"))
	require.NoError(t, pay(strings.Repeat("k", 256), visa, rejected(nil)).CheckProblem(400, "idempotency_key_invalid"))
	require.NoError(t, pay(`"unterminated`, visa, rejected(nil)).CheckProblem(400, "idempotency_key_invalid"))
	for _, body := range []string{
		`{"order_id":"o-3","amount":500,"currency":"USD","payment_method":"pm_card_visa","coupon":"x"}`,
		`{"order_id":"o-3","amount":0,"currency":"USD","payment_method":"pm_card_visa"}`,
		`{"order_id":"o-3","amount":500,"currency":"usd","payment_method":"pm_card_visa"}`,
		`{"order_id":"o-3","amount":500,"currency":"USD"}`,
		`{"order_id":"","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`,
		`{"order_id":"o-3","amount":"500","currency":"USD","payment_method":"pm_card_visa"}`,
		`{"order_id":"o-3","amount":500,"currency":"USD","payment_method":"pm_card_visa","metadata":{"k":1}}`,
		`{"order_id":"o-3",`,
		`[]`,
	} {
		require.NoError(t, pay("oa-3", body, rejected(nil)).CheckProblem(400, "invalid_request"))
	}
	// 413 and 415.
	huge := `{"order_id":"o-3","amount":500,"currency":"USD","payment_method":"pm_card_visa","description":"` + strings.Repeat("x", 70<<10) + `"}`
	require.NoError(t, pay("oa-3", huge, rejected(expectContinue)).CheckProblem(413, "payload_too_large"))
	require.NoError(t, pay("oa-3", visa, rejected(map[string]string{"Content-Type": "text/plain"})).CheckProblem(415, "unsupported_media_type"))

	// 401: without a key (the document refuses it too), and with an unknown one.
	require.NoError(t, anon.MustDo(t, http.MethodPost, "/v1/payments", []byte(visa), rejected(map[string]string{"Content-Type": "application/json", "Idempotency-Key": "oa-3"})).CheckProblem(401, "unauthorized"))
	require.NoError(t, get(anon, "/v1/payments/"+id, rejected(nil)).CheckProblem(401, "unauthorized"))
	require.NoError(t, get(anon, "/v1/payments?order_id=o-1", rejected(nil)).CheckProblem(401, "unauthorized"))
	stranger := proctest.NewClient(s.pod.URL(), "sk_not_a_key")
	stranger.HTTP.Transport = c.HTTP.Transport
	require.NoError(t, stranger.MustDo(t, http.MethodPost, "/v1/payments", []byte(visa), map[string]string{"Content-Type": "application/json", "Idempotency-Key": "oa-3"}).CheckProblem(401, "unauthorized"))

	// Reads: get, get with sync, list, 404 (unknown, and another tenant's), list without order_id.
	got := get(c, "/v1/payments/"+id, nil)
	require.Equal(t, 200, got.Status, "%s", got)
	require.JSONEq(t, string(first.Raw), string(got.Raw))
	synced := get(c, "/v1/payments/"+id+"?sync=true", nil)
	require.Equal(t, 200, synced.Status, "%s", synced)
	require.Equal(t, "SUCCEEDED", synced.Str("status"))
	require.JSONEq(t, string(first.Raw), string(synced.Raw), "sync of a final payment changes nothing")
	// ?sync takes strconv.ParseBool's spellings, as the document's boolean does; another value is 400.
	require.Equal(t, 200, get(c, "/v1/payments/"+id+"?sync=1", nil).Status)
	require.NoError(t, get(c, "/v1/payments/"+id+"?sync=yes", rejected(nil)).CheckProblem(400, "invalid_request"))
	list := get(c, "/v1/payments?order_id=o-1", nil)
	require.Equal(t, 200, list.Status, "%s", list)
	require.Len(t, list.JSON["data"], 1)
	require.NoError(t, get(c, "/v1/payments/pay_doesnotexist", nil).CheckProblem(404, "payment_not_found"))
	other := proctest.CreateTenant(t, s.db.URL, "other-shop")
	otherClient := proctest.NewClient(s.pod.URL(), other.APIKey)
	otherClient.HTTP.Transport = c.HTTP.Transport
	opsProblem(t, get(otherClient, "/v1/payments/"+id, nil), 404, "payment_not_found")

	// Lists: every payment of the tenant (without order_id, or with an empty
	// one), newest first, in pages; 400 for a bad limit or an unknown cursor,
	// another tenant's payment included.
	listIDs := func(r apiclient.Response) []string {
		t.Helper()
		require.Equal(t, 200, r.Status, "%s", r)
		var ids []string
		for _, item := range r.JSON["data"].([]any) {
			ids = append(ids, item.(map[string]any)["id"].(string))
		}
		return ids
	}
	all := get(c, "/v1/payments", nil)
	require.Equal(t, []string{declined.Str("id"), id}, listIDs(all))
	require.Equal(t, false, all.JSON["has_more"])
	require.Equal(t, []string{declined.Str("id"), id}, listIDs(get(c, "/v1/payments?order_id=", nil)))
	page := get(c, "/v1/payments?limit=1", nil)
	require.Equal(t, []string{declined.Str("id")}, listIDs(page))
	require.Equal(t, true, page.JSON["has_more"])
	page = get(c, "/v1/payments?limit=1&starting_after="+declined.Str("id"), nil)
	require.Equal(t, []string{id}, listIDs(page))
	require.Equal(t, false, page.JSON["has_more"])
	for _, q := range []string{"limit=0", "limit=101", "limit=ten", "starting_after="} {
		opsProblem(t, get(c, "/v1/payments?"+q, rejected(nil)), 400, "invalid_request")
	}
	opsProblem(t, get(c, "/v1/payments?starting_after=pay_doesnotexist", nil), 400, "invalid_request")
	theirs := opsOK(t)(otherClient.Do(http.MethodPost, "/v1/payments", []byte(`{"order_id":"o-1","amount":100,"currency":"USD","payment_method":"pm_card_visa"}`),
		map[string]string{"Content-Type": "application/json", "Idempotency-Key": "oa-1"}))
	require.Equal(t, 201, theirs.Status, "another tenant's order o-1 and key oa-1 are its own: %s", theirs)
	opsProblem(t, get(c, "/v1/payments?starting_after="+theirs.Str("id"), nil), 400, "invalid_request")
	require.Equal(t, []string{theirs.Str("id")}, listIDs(get(otherClient, "/v1/payments", nil)))

	// Routing rules: stored and answered as stored, cleared, refused (and
	// nothing changed) for an unknown provider, an empty or repeating
	// provider list, a rule after the catch-all, a repeated or bad
	// currency, more than 50 rules, a missing or unknown field; 401, 413
	// and 415 as elsewhere. The document refuses what it can express.
	putRouting := func(cl *proctest.Client, body string, h map[string]string) apiclient.Response {
		t.Helper()
		headers := map[string]string{"Content-Type": "application/json"}
		for k, val := range h {
			headers[k] = val
		}
		return opsOK(t)(cl.Do(http.MethodPut, "/v1/routing", []byte(body), headers))
	}
	require.JSONEq(t, `{"rules":[]}`, string(get(c, "/v1/routing", nil).Raw))
	rules := `{"rules":[{"currency":"EUR","providers":["sim"]},{"providers":["sim"]}]}`
	stored := putRouting(c, rules, nil)
	require.Equal(t, 200, stored.Status, "%s", stored)
	require.JSONEq(t, rules, string(stored.Raw))
	gotRules := get(c, "/v1/routing", nil)
	require.Equal(t, 200, gotRules.Status, "%s", gotRules)
	require.JSONEq(t, rules, string(gotRules.Raw))
	eur := pay("oa-eur", `{"order_id":"o-eur","amount":250,"currency":"EUR","payment_method":"pm_card_visa"}`, nil)
	require.Equal(t, 201, eur.Status, "%s", eur)
	require.Equal(t, "sim", eur.Str("provider"), "the EUR rule")
	for _, bad := range []struct {
		body     string
		expected bool // the document can tell it is invalid
	}{
		{`{"rules":[{"providers":["sim_b"]}]}`, false},
		{`{"rules":[{"providers":["sim"]},{"currency":"EUR","providers":["sim"]}]}`, false},
		{`{"rules":[{"currency":"EUR","providers":["sim"]},{"currency":"EUR","providers":["sim"]}]}`, false},
		{`{"rules":[{"currency":"EUR","providers":[]}]}`, true},
		{`{"rules":[{"providers":["sim","sim"]}]}`, true},
		{`{"rules":[{"currency":"eur","providers":["sim"]}]}`, true},
		{`{"rules":[{"currency":"","providers":["sim"]}]}`, true},
		{`{"rules":[{"currency":"EUR","providers":["sim"],"weight":2}]}`, true},
		{`{"rules":[],"default":"sim"}`, true},
		{`{}`, true},
		{`{"rules":`, true},
		{tooManyRules(), true},
	} {
		var h map[string]string
		if bad.expected {
			h = rejected(nil)
		}
		opsProblem(t, putRouting(c, bad.body, h), 400, "invalid_request")
	}
	require.JSONEq(t, rules, string(get(c, "/v1/routing", nil).Raw), "refused rules changed nothing")
	opsProblem(t, putRouting(c, `{"rules":[],"pad":"`+strings.Repeat("x", 70<<10)+`"}`, rejected(expectContinue)), 413, "payload_too_large")
	opsProblem(t, putRouting(c, rules, rejected(map[string]string{"Content-Type": "text/plain"})), 415, "unsupported_media_type")
	opsProblem(t, putRouting(anon, rules, rejected(nil)), 401, "unauthorized")
	opsProblem(t, get(anon, "/v1/routing", rejected(nil)), 401, "unauthorized")
	cleared := putRouting(c, `{"rules":[]}`, nil)
	require.Equal(t, 200, cleared.Status, "%s", cleared)
	require.JSONEq(t, `{"rules":[]}`, string(cleared.Raw))
	require.JSONEq(t, `{"rules":[]}`, string(get(c, "/v1/routing", nil).Raw))

	// 409 in use: a second request with the key of a slow one in flight.
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 5000})
	calls := s.sim.Stats(t).ChargeCalls
	slow := `{"order_id":"o-4","amount":900,"currency":"USD","payment_method":"pm_card_visa"}`
	var (
		wg       sync.WaitGroup
		slowResp apiclient.Response
		slowErr  error
	)
	// Not pay: a goroutine must not fail the test.
	wg.Go(func() {
		slowResp, slowErr = c.Do(http.MethodPost, "/v1/payments", []byte(slow),
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": "oa-4"})
	})
	testkit.Eventually(t, 30*time.Second, "the slow charge reaches the provider", func() bool { return s.sim.Stats(t).ChargeCalls > calls })
	busy := pay("oa-4", slow, nil)
	require.NoError(t, busy.CheckProblem(409, "idempotency_key_in_use"))
	requireRetryAfter(t, busy)
	wg.Wait()
	require.NoError(t, slowErr)
	require.Equal(t, 201, slowResp.Status, "%s", slowResp)
	s.sim.ClearFaults(t)

	// 202 UNKNOWN: every call fails, two failures open the breaker.
	s.sim.SetFaults(t, providersim.Faults{ErrorRate: 1, ErrorStatus: 503})
	unknownBody := `{"order_id":"o-5","amount":300,"currency":"USD","payment_method":"pm_card_visa"}`
	unknown := pay("oa-5", unknownBody, nil)
	require.Equal(t, 202, unknown.Status, "%s", unknown)
	require.Equal(t, string(attempts.Unknown), unknown.Str("status"))
	// The provider cannot be asked while the breaker is open: sync answers what is known.
	synced = get(c, "/v1/payments/"+unknown.Str("id")+"?sync=true", nil)
	require.Equal(t, 200, synced.Status, "%s", synced)
	require.Equal(t, string(attempts.Unknown), synced.Str("status"))
	require.Equal(t, unknown.Str("id"), synced.Str("id"))
	// 503 while the breaker is open. A slow machine may reach the end of the
	// cooldown first: then the trial call fails, reopening it, and the new
	// payment is another 202; try again with a new order.
	var unavailable apiclient.Response
	n := 0
	testkit.Eventually(t, time.Minute, "a create is refused while the breaker is open", func() bool {
		n++
		k := "oa-6-" + strconv.Itoa(n)
		unavailable = pay(k, `{"order_id":"`+k+`","amount":300,"currency":"USD","payment_method":"pm_card_visa"}`, nil)
		return unavailable.Status == 503
	})
	require.NoError(t, unavailable.CheckProblem(503, "provider_unavailable"))
	requireRetryAfter(t, unavailable)
	// Nothing was sent anywhere: the payment is CREATED with no provider.
	k := "oa-6-" + strconv.Itoa(n)
	notSent := get(c, "/v1/payments?order_id="+k, nil)
	require.Equal(t, 200, notSent.Status, "%s", notSent)
	require.Len(t, notSent.JSON["data"], 1)
	created := notSent.JSON["data"].([]any)[0].(map[string]any)
	require.Equal(t, "CREATED", created["status"])
	require.Nil(t, created["provider"], "no provider chosen: %v", created)
	// The provider recovers; the UNKNOWN payment's retry resumes it.
	s.sim.ClearFaults(t)
	var resumed apiclient.Response
	testkit.Eventually(t, time.Minute, "the UNKNOWN payment resumes once the breaker lets a call through", func() bool {
		resumed = pay("oa-5", unknownBody, nil)
		return resumed.Status != 503 && resumed.Status != 409
	})
	require.Equal(t, 201, resumed.Status, "%s", resumed)
	require.Equal(t, unknown.Str("id"), resumed.Str("id"))

	// Refunds of the first payment (500).
	refund := func(cl *proctest.Client, paymentID, key, body string, h map[string]string) apiclient.Response {
		t.Helper()
		headers := map[string]string{"Content-Type": "application/json"}
		if key != "" {
			headers["Idempotency-Key"] = key
		}
		for k, val := range h {
			headers[k] = val
		}
		return opsOK(t)(cl.Do(http.MethodPost, "/v1/payments/"+paymentID+"/refunds", []byte(body), headers))
	}
	refundable := func() float64 {
		t.Helper()
		p := get(c, "/v1/payments/"+id, nil)
		require.Equal(t, 200, p.Status, "%s", p)
		require.Equal(t, "SUCCEEDED", p.Str("status"), "a refund leaves the payment SUCCEEDED")
		return p.JSON["amount_refundable"].(float64)
	}

	// 201, its replay (also of a reordered body), and reads.
	r1Body := `{"amount":200,"reason":"requested_by_customer","metadata":{"ticket":"t-1"}}`
	r1 := refund(c, id, "oa-r1", r1Body, nil)
	require.Equal(t, 201, r1.Status, "%s", r1)
	require.Equal(t, "SUCCEEDED", r1.Str("status"))
	require.Equal(t, id, r1.Str("payment_id"))
	require.EqualValues(t, 200, r1.JSON["amount"])
	require.False(t, r1.Replayed())
	rid := r1.Str("id")
	r1again := refund(c, id, "oa-r1", `{"metadata":{"ticket":"t-1"},"reason":"requested_by_customer","amount":200}`, nil)
	require.True(t, r1again.Status == 201 && r1again.Replayed(), "%s", r1again)
	require.JSONEq(t, string(r1.Raw), string(r1again.Raw))
	require.EqualValues(t, 300, refundable())
	gotRefund := get(c, "/v1/refunds/"+rid, nil)
	require.Equal(t, 200, gotRefund.Status, "%s", gotRefund)
	require.Equal(t, rid, gotRefund.Str("id"))
	require.Equal(t, 200, get(c, "/v1/refunds/"+rid+"?sync=true", nil).Status)
	require.Equal(t, 200, get(c, "/v1/refunds/"+rid+"?sync=T", nil).Status)
	require.NoError(t, get(c, "/v1/refunds/"+rid+"?sync=maybe", rejected(nil)).CheckProblem(400, "invalid_request"))

	// 422: the key names another request (another body; the same body on
	// another payment; the payment's own key); the amount is more than the rest.
	opsProblem(t, refund(c, id, "oa-r1", `{"amount":201}`, nil), 422, "idempotency_key_reused")
	opsProblem(t, refund(c, declined.Str("id"), "oa-r1", r1Body, nil), 422, "idempotency_key_reused")
	opsProblem(t, refund(c, id, "oa-1", r1Body, nil), 422, "idempotency_key_reused")
	exceeds := refund(c, id, "oa-r2", `{"amount":301}`, nil)
	opsProblem(t, exceeds, 422, "refund_exceeds_refundable")
	require.Contains(t, exceeds.Str("detail"), "300")
	// 409: a FAILED payment is not refundable; 404: no such payment, or another tenant's.
	opsProblem(t, refund(c, declined.Str("id"), "oa-r2", `{}`, nil), 409, "payment_not_refundable")
	opsProblem(t, refund(c, "pay_doesnotexist", "oa-r2", `{}`, nil), 404, "payment_not_found")
	opsProblem(t, refund(otherClient, id, "oa-r2", `{}`, nil), 404, "payment_not_found")

	// 400s, 413, 415 and 401, each also refused by the document.
	opsProblem(t, refund(c, id, "", `{}`, rejected(nil)), 400, "idempotency_key_missing")
	opsProblem(t, refund(c, id, strings.Repeat("k", 256), `{}`, rejected(nil)), 400, "idempotency_key_invalid")
	for _, body := range []string{
		`{"amount":0}`, `{"amount":-5}`, `{"amount":"100"}`, `{"amount":1.5}`, `{"reason":"because"}`,
		`{"coupon":"x"}`, `{"metadata":{"k":1}}`, `{"amount":`, `[]`,
	} {
		opsProblem(t, refund(c, id, "oa-r2", body, rejected(nil)), 400, "invalid_request")
	}
	opsProblem(t, refund(c, id, "oa-r2", `{"metadata":{"k":"`+strings.Repeat("x", 70<<10)+`"}}`, rejected(expectContinue)), 413, "payload_too_large")
	opsProblem(t, refund(c, id, "oa-r2", `{}`, rejected(map[string]string{"Content-Type": "text/plain"})), 415, "unsupported_media_type")
	opsProblem(t, refund(anon, id, "oa-r2", `{}`, rejected(nil)), 401, "unauthorized")
	opsProblem(t, get(anon, "/v1/refunds/"+rid, rejected(nil)), 401, "unauthorized")
	opsProblem(t, get(anon, "/v1/payments/"+id+"/refunds", rejected(nil)), 401, "unauthorized")

	// 409 in use: a second request with the key of a slow refund in flight.
	s.sim.SetFaults(t, providersim.Faults{LatencyMS: 5000, Refunds: true})
	refundCalls := s.sim.Stats(t).RefundCalls
	var slowRefund apiclient.Response
	wg.Go(func() { slowRefund = refund(c, id, "oa-r3", `{"amount":100}`, nil) })
	testkit.Eventually(t, 30*time.Second, "the slow refund reaches the provider", func() bool { return s.sim.Stats(t).RefundCalls > refundCalls })
	busyRefund := refund(c, id, "oa-r3", `{"amount":100}`, nil)
	opsProblem(t, busyRefund, 409, "idempotency_key_in_use")
	require.GreaterOrEqual(t, retryAfterSeconds(busyRefund), 1, "%s", busyRefund)
	wg.Wait()
	require.Equal(t, 201, slowRefund.Status, "%s", slowRefund)
	s.sim.ClearFaults(t)
	require.EqualValues(t, 200, refundable())

	// The payment's refunds, newest first, in pages; 400 for a bad limit or
	// a cursor that is no refund of this payment; 404 for a payment that is
	// not the tenant's, and for a refund that is not.
	require.Equal(t, []string{slowRefund.Str("id"), rid}, listIDs(get(c, "/v1/payments/"+id+"/refunds", nil)))
	page = get(c, "/v1/payments/"+id+"/refunds?limit=1", nil)
	require.Equal(t, []string{slowRefund.Str("id")}, listIDs(page))
	require.Equal(t, true, page.JSON["has_more"])
	page = get(c, "/v1/payments/"+id+"/refunds?limit=1&starting_after="+slowRefund.Str("id"), nil)
	require.Equal(t, []string{rid}, listIDs(page))
	require.Equal(t, false, page.JSON["has_more"])
	require.Empty(t, listIDs(get(c, "/v1/payments/"+declined.Str("id")+"/refunds", nil)))
	for _, q := range []string{"limit=0", "limit=101", "starting_after="} {
		opsProblem(t, get(c, "/v1/payments/"+id+"/refunds?"+q, rejected(nil)), 400, "invalid_request")
	}
	opsProblem(t, get(c, "/v1/payments/"+id+"/refunds?starting_after=rfd_doesnotexist", nil), 400, "invalid_request")
	opsProblem(t, get(c, "/v1/payments/"+declined.Str("id")+"/refunds?starting_after="+rid, nil), 400, "invalid_request")
	opsProblem(t, get(c, "/v1/payments/pay_doesnotexist/refunds", nil), 404, "payment_not_found")
	opsProblem(t, get(otherClient, "/v1/payments/"+id+"/refunds", nil), 404, "payment_not_found")
	opsProblem(t, get(c, "/v1/refunds/rfd_doesnotexist", nil), 404, "refund_not_found")
	opsProblem(t, get(otherClient, "/v1/refunds/"+rid, nil), 404, "refund_not_found")

	// 202 UNKNOWN: every refund call fails, two failures open the breaker.
	// The UNKNOWN refund holds its amount.
	s.sim.SetFaults(t, providersim.Faults{ErrorRate: 1, ErrorStatus: 503, Refunds: true})
	unknownRefund := refund(c, id, "oa-r4", `{"amount":50}`, nil)
	require.Equal(t, 202, unknownRefund.Status, "%s", unknownRefund)
	require.Equal(t, string(attempts.Unknown), unknownRefund.Str("status"))
	require.Equal(t, 200, get(c, "/v1/refunds/"+unknownRefund.Str("id")+"?sync=true", nil).Status)
	require.EqualValues(t, 150, refundable())
	// 503 while the breaker is open (as for payments, a slow machine may see
	// the trial call fail first: then that refund is another 202).
	var refundKeys []string
	var refundUnavailable apiclient.Response
	testkit.Eventually(t, time.Minute, "a refund is refused while the breaker is open", func() bool {
		k := "oa-r5-" + strconv.Itoa(len(refundKeys))
		refundKeys = append(refundKeys, k)
		refundUnavailable = refund(c, id, k, `{"amount":10}`, nil)
		return refundUnavailable.Status == 503
	})
	opsProblem(t, refundUnavailable, 503, "provider_unavailable")
	require.GreaterOrEqual(t, retryAfterSeconds(refundUnavailable), 1)
	// The refund answered 503 stays CREATED, holding its amount, and its key
	// keeps the request's fingerprint.
	require.EqualValues(t, 150-10*len(refundKeys), refundable())
	opsProblem(t, refund(c, id, refundKeys[len(refundKeys)-1], `{"amount":11}`, nil), 422, "idempotency_key_reused")
	// The provider recovers; the same keys resume the refunds.
	s.sim.ClearFaults(t)
	var resumedRefund apiclient.Response
	testkit.Eventually(t, time.Minute, "the UNKNOWN refund resumes once the breaker lets a call through", func() bool {
		resumedRefund = refund(c, id, "oa-r4", `{"amount":50}`, nil)
		return resumedRefund.Status != 503 && resumedRefund.Status != 409
	})
	require.Equal(t, 201, resumedRefund.Status, "%s", resumedRefund)
	require.Equal(t, unknownRefund.Str("id"), resumedRefund.Str("id"))
	for _, k := range refundKeys {
		r := refund(c, id, k, `{"amount":10}`, nil)
		require.Equal(t, 201, r.Status, "%s: %s", k, r)
	}
	rest := 150 - 10*len(refundKeys)
	require.EqualValues(t, rest, refundable())

	// 402: the rest of the charge is refunded at the provider behind our
	// back (its refund.succeeded webhook is an unexpected_refund anomaly);
	// the provider then refuses ours, whose amount is released.
	provider := proctest.NewClient(s.sim.URL(), "sk_sim")
	direct := opsOK(t)(provider.Do(http.MethodPost, "/v1/refunds", []byte(`{"charge":"`+first.Str("provider_charge_id")+`"}`),
		map[string]string{"Content-Type": "application/json", "Idempotency-Key": "oa-behind-our-back"}))
	require.Equal(t, 201, direct.Status, "%s", direct)
	refused := refund(c, id, "oa-r6", `{"amount":1}`, nil)
	require.Equal(t, 402, refused.Status, "%s", refused)
	require.Equal(t, "FAILED", refused.Str("status"))
	require.Equal(t, "amount_too_large", refused.Str("failure_code"))
	rerefused := refund(c, id, "oa-r6", `{"amount":1}`, nil)
	require.True(t, rerefused.Status == 402 && rerefused.Replayed(), "%s", rerefused)
	require.EqualValues(t, rest, refundable())

	// Captures and voids of manual payments.
	hold := func(cl *proctest.Client, paymentID, what, key, body string, h map[string]string) apiclient.Response {
		t.Helper()
		headers := map[string]string{"Content-Type": "application/json"}
		if key != "" {
			headers["Idempotency-Key"] = key
		}
		for k, val := range h {
			headers[k] = val
		}
		return opsOK(t)(cl.Do(http.MethodPost, "/v1/payments/"+paymentID+"/"+what, []byte(body), headers))
	}
	authorized := func(order string) apiclient.Response {
		t.Helper()
		r := pay("oa-"+order, `{"order_id":"`+order+`","amount":800,"currency":"USD","payment_method":"pm_card_visa","capture_method":"manual"}`, nil)
		require.Equal(t, 201, r.Status, "%s", r)
		require.Equal(t, "AUTHORIZED", r.Str("status"))
		return r
	}
	held := authorized("o-cap-1")
	heldID := held.Str("id")
	require.EqualValues(t, 800, held.JSON["amount_capturable"])
	// 400s, 413, 415 and 401, each also refused by the document.
	opsProblem(t, hold(c, heldID, "captures", "", `{}`, rejected(nil)), 400, "idempotency_key_missing")
	for _, body := range []string{`{"amount":0}`, `{"amount":-1}`, `{"amount":"5"}`, `{"amount":2.5}`, `{"x":1}`, `[]`} {
		opsProblem(t, hold(c, heldID, "captures", "oa-c1", body, rejected(nil)), 400, "invalid_request")
	}
	opsProblem(t, hold(c, heldID, "voids", "", `{}`, rejected(nil)), 400, "idempotency_key_missing")
	for _, body := range []string{`{"reason":"bored"}`, `{"amount":1}`, `[]`} {
		opsProblem(t, hold(c, heldID, "voids", "oa-v1", body, rejected(nil)), 400, "invalid_request")
	}
	for _, what := range []string{"captures", "voids"} {
		opsProblem(t, hold(c, heldID, what, "oa-c1", `{"x":"`+strings.Repeat("x", 70<<10)+`"}`, rejected(expectContinue)), 413, "payload_too_large")
		opsProblem(t, hold(c, heldID, what, "oa-c1", `{}`, rejected(map[string]string{"Content-Type": "text/plain"})), 415, "unsupported_media_type")
		opsProblem(t, hold(anon, heldID, what, "oa-c1", `{}`, rejected(nil)), 401, "unauthorized")
		opsProblem(t, hold(c, "pay_doesnotexist", what, "oa-c1", `{}`, nil), 404, "payment_not_found")
		opsProblem(t, hold(otherClient, heldID, what, "oa-c1", `{}`, nil), 404, "payment_not_found")
	}
	opsProblem(t, hold(c, id, "captures", "oa-c1", `{}`, nil), 409, "payment_not_capturable")
	opsProblem(t, hold(c, id, "voids", "oa-v1", `{}`, nil), 409, "payment_not_voidable")
	exceedsCapture := hold(c, heldID, "captures", "oa-c1", `{"amount":801}`, nil)
	opsProblem(t, exceedsCapture, 422, "capture_exceeds_authorized")
	require.Contains(t, exceedsCapture.Str("detail"), "800")
	// 201, its replay, the payment's new state, and reads.
	captured := hold(c, heldID, "captures", "oa-c1", `{"amount":500}`, nil)
	require.Equal(t, 201, captured.Status, "%s", captured)
	require.Equal(t, "SUCCEEDED", captured.Str("status"))
	recaptured := hold(c, heldID, "captures", "oa-c1", `{"amount":500}`, nil)
	require.True(t, recaptured.Status == 201 && recaptured.Replayed(), "%s", recaptured)
	opsProblem(t, hold(c, heldID, "captures", "oa-c1", `{"amount":400}`, nil), 422, "idempotency_key_reused")
	opsProblem(t, hold(c, heldID, "voids", "oa-c1", `{}`, nil), 422, "idempotency_key_reused")
	capturedPayment := get(c, "/v1/payments/"+heldID, nil)
	require.Equal(t, "SUCCEEDED", capturedPayment.Str("status"))
	require.EqualValues(t, 500, capturedPayment.JSON["amount_captured"])
	require.EqualValues(t, 500, capturedPayment.JSON["amount_refundable"])
	require.Equal(t, 200, get(c, "/v1/captures/"+captured.Str("id"), nil).Status)
	require.Equal(t, 200, get(c, "/v1/captures/"+captured.Str("id")+"?sync=true", nil).Status)
	require.NoError(t, get(c, "/v1/captures/"+captured.Str("id")+"?sync=maybe", rejected(nil)).CheckProblem(400, "invalid_request"))
	opsProblem(t, get(c, "/v1/captures/cap_doesnotexist", nil), 404, "capture_not_found")
	opsProblem(t, get(otherClient, "/v1/captures/"+captured.Str("id"), nil), 404, "capture_not_found")
	opsProblem(t, get(anon, "/v1/captures/"+captured.Str("id"), rejected(nil)), 401, "unauthorized")
	toVoid := authorized("o-cap-2").Str("id")
	voided := hold(c, toVoid, "voids", "oa-v1", `{"reason":"requested_by_customer"}`, nil)
	require.Equal(t, 201, voided.Status, "%s", voided)
	require.True(t, hold(c, toVoid, "voids", "oa-v1", `{"reason":"requested_by_customer"}`, nil).Replayed())
	opsProblem(t, hold(c, toVoid, "voids", "oa-v1", `{}`, nil), 422, "idempotency_key_reused")
	canceledPayment := get(c, "/v1/payments/"+toVoid, nil)
	require.Equal(t, "CANCELED", canceledPayment.Str("status"))
	require.Equal(t, "requested_by_customer", canceledPayment.Str("canceled_reason"))
	require.Equal(t, 200, get(c, "/v1/voids/"+voided.Str("id"), nil).Status)
	require.Equal(t, 200, get(c, "/v1/voids/"+voided.Str("id")+"?sync=true", nil).Status)
	require.NoError(t, get(c, "/v1/voids/"+voided.Str("id")+"?sync=", rejected(nil)).CheckProblem(400, "invalid_request"))
	opsProblem(t, get(c, "/v1/voids/"+captured.Str("id"), nil), 404, "void_not_found")
	opsProblem(t, get(anon, "/v1/voids/"+voided.Str("id"), rejected(nil)), 401, "unauthorized")
	// 202 and 503: every capture and void call fails (503, nothing done, so
	// no webhook resolves them meanwhile); two failures open the breaker,
	// which stays open 2s. A 503 leaves the capture or void
	// CREATED with its key, which the same request resumes: each is retried
	// as it is until the breaker lets its call through.
	var pending []string
	for i := range 6 {
		pending = append(pending, authorized("o-cap-p"+strconv.Itoa(i)).Str("id"))
	}
	s.sim.SetFaults(t, providersim.Faults{ErrorRate: 1, ErrorStatus: 503, Captures: true})
	until := func(paymentID, what, key string, want int) apiclient.Response {
		t.Helper()
		var r apiclient.Response
		testkit.Eventually(t, time.Minute, fmt.Sprintf("%s %s answered %d", what, key, want), func() bool {
			r = hold(c, paymentID, what, key, `{}`, nil)
			return r.Status == want || (r.Status != 503 && r.Status != 409)
		})
		return r
	}
	unknownCapture := until(pending[0], "captures", "oa-cp-0", 202)
	require.Equal(t, 202, unknownCapture.Status, "%s", unknownCapture)
	require.Equal(t, "UNKNOWN", unknownCapture.Str("status"))
	require.Equal(t, "AUTHORIZED", get(c, "/v1/payments/"+pending[0], nil).Str("status"), "an UNKNOWN capture leaves it held")
	opsProblem(t, hold(c, pending[0], "voids", "oa-vp-0", `{}`, nil), 409, "payment_not_voidable")
	unknownVoid := until(pending[1], "voids", "oa-vp-1", 202)
	require.Equal(t, 202, unknownVoid.Status, "%s", unknownVoid)
	// The breaker is open again (the last call failed too): a slow machine
	// may see it close first, then the call is another 202
	// and the next payment is tried.
	next := 2
	refusedAt := map[string]int{} // what → the pending payment it was refused 503 for
	for _, what := range []string{"captures", "voids"} {
		var last apiclient.Response
		testkit.Eventually(t, time.Minute, what+" refused while the breaker is open", func() bool {
			require.Less(t, next, len(pending), "no payment left to try")
			last = hold(c, pending[next], what, "oa-p-"+strconv.Itoa(next), `{}`, nil)
			next++
			return last.Status == 503
		})
		opsProblem(t, last, 503, "provider_unavailable")
		requireRetryAfter(t, last)
		refusedAt[what] = next - 1
	}
	s.sim.ClearFaults(t)
	// 402: the authorizations of the two refused ones expire at the
	// provider (its webhooks make the payments CANCELED, expired); their
	// capture and void, still CREATED, resume with their keys and are
	// refused authorization_expired.
	for what, i := range refusedAt {
		s.sim.Expire(t, get(c, "/v1/payments/"+pending[i], nil).Str("provider_charge_id"))
		r := until(pending[i], what, "oa-p-"+strconv.Itoa(i), 402)
		require.Equal(t, 402, r.Status, "%s", r)
		require.Equal(t, "FAILED", r.Str("status"))
		require.Equal(t, "authorization_expired", r.Str("failure_code"))
		p := get(c, "/v1/payments/"+pending[i], nil)
		require.Equal(t, "CANCELED", p.Str("status"))
		require.Equal(t, "expired", p.Str("canceled_reason"))
	}
	// The UNKNOWN capture resumes with its key once the provider is back.
	resumedCapture := until(pending[0], "captures", "oa-cp-0", 201)
	require.Equal(t, 201, resumedCapture.Status, "%s", resumedCapture)
	require.Equal(t, unknownCapture.Str("id"), resumedCapture.Str("id"))

	// Webhooks: the simulator's own deliveries are validated by hooks; here
	// the other answers.
	orphan := providersim.Charge{ID: "ch_oa_orphan", Amount: 100, Currency: "USD", Status: providersim.StatusSucceeded, Reference: "pay_nobody", Created: time.Now().Unix()}
	event := opsEvent("evt_oa_1", providersim.EventChargeSucceeded, orphan)
	ok := s.postWebhook(t, s.secret, event, nil)
	require.Equal(t, 200, ok.Status, "%s", ok)
	require.Equal(t, true, ok.JSON["received"])
	require.Equal(t, 200, s.postWebhook(t, s.secret, event, nil).Status, "a duplicate is answered 200")
	require.NoError(t, s.postWebhook(t, "", event, rejected(nil)).CheckProblem(401, "invalid_signature"))
	require.NoError(t, s.postWebhook(t, "whsec_wrong", event, nil).CheckProblem(401, "invalid_signature"))
	require.NoError(t, s.postWebhook(t, "whsec_of_no_provider", event, nil).CheckProblem(401, "invalid_signature"),
		"WEBHOOK_SECRETS_SIM replaces WEBHOOK_SECRETS for sim")
	elsewhere := s.anon.MustDo(t, http.MethodPost, "/v1/webhooks/sim_b", event, map[string]string{
		"Content-Type": "application/json", "Sim-Signature": providersim.SignatureHeader(s.secret, time.Now().Unix(), event),
	})
	require.NoError(t, elsewhere.CheckProblem(404, "not_found"), "no provider sim_b is configured")
	require.NoError(t, s.postWebhook(t, s.secret, []byte(`{"id":`), rejected(nil)).CheckProblem(400, "invalid_request"))
	require.NoError(t, s.postWebhook(t, s.secret, opsEvent("evt_oa_2", "charge.exploded", orphan), rejected(nil)).CheckProblem(400, "invalid_request"))
	padded, err := json.Marshal(map[string]any{"id": "evt_oa_3", "type": providersim.EventChargeSucceeded, "data": map[string]any{"charge": orphan}, "padding": strings.Repeat("x", 300<<10)})
	require.NoError(t, err)
	require.NoError(t, s.postWebhook(t, s.secret, padded, expectContinue).CheckProblem(413, "payload_too_large"))
	// The simulator delivered (at least) the webhooks of the charges above.
	testkit.Eventually(t, time.Minute, "the simulator's webhooks are delivered", func() bool {
		hooks.mu.Lock()
		defer hooks.mu.Unlock()
		return hooks.seen["POST /v1/webhooks/{provider} 200"] >= 3
	})

	// The database's 503s are exercised, and validated against the
	// document, by e2e/database_outage_test.go. The refund reads and the
	// routing rules answer theirs from the same place (authentication reads
	// the database first, for every /v1/ route).
	// The 429s need a pod with a rate limit: TestOpenAPIRateLimited.
	v.requireCovered(t, append(skipPaths(merchantWebhookPaths), "* * 500", "GET /readyz 503",
		"GET /v1/payments 503", "GET /v1/payments/{id} 503", "POST /v1/webhooks/{provider} 503",
		"GET /v1/payments/{id}/refunds 503", "GET /v1/refunds/{id} 503",
		"GET /v1/captures/{id} 503", "GET /v1/voids/{id} 503",
		"GET /v1/routing 503", "PUT /v1/routing 503",
		"* * 429")...)
}

// merchantWebhookPaths are the operations of the merchant webhooks, which
// TestOpenAPIMerchantWebhooks exercises.
var merchantWebhookPaths = []string{
	"/v1/webhook_endpoints", "/v1/webhook_endpoints/{id}", "/v1/webhook_endpoints/{id}/rotate_secret",
	"/v1/webhook_endpoints/{id}/deliveries", "/v1/webhook_deliveries/{id}/retry",
}

// skipPaths are requireCovered skips of every response of paths.
func skipPaths(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = "* " + p + " *"
	}
	return out
}

// A pod with TENANT_RATE_LIMIT answers every operation of the tenant API
// with the documented 429: a tenant over its bucket gets rate_limited with Retry-After.
func TestOpenAPIRateLimited(t *testing.T) {
	t.Parallel()
	v := newSpecValidator(t, nil)
	// One token, earned back only after 1000s: the second request is refused.
	s := setupOps(t, opsOptions{podEnv: []string{"TENANT_RATE_LIMIT=0.001", "TENANT_RATE_BURST=1"}, transport: v.wrap})
	first := s.client.MustPay(t, "rl-oa-1", apiclient.Visa("o-rl-1", 500))
	require.Equal(t, 201, first.Status, "%s", first)
	id := first.Str("id")
	json := map[string]string{"Content-Type": "application/json"}
	for _, r := range []apiclient.Response{
		s.client.MustPay(t, "rl-oa-2", apiclient.Visa("o-rl-2", 500)),
		s.client.MustGet(t, "/v1/payments"),
		s.client.MustGet(t, "/v1/payments/"+id),
		s.client.MustDo(t, http.MethodPost, "/v1/payments/"+id+"/refunds", []byte(`{"amount":100}`),
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": "rl-oa-r1"}),
		s.client.MustGet(t, "/v1/payments/"+id+"/refunds"),
		s.client.MustGet(t, "/v1/refunds/rfd_none"),
		s.client.MustDo(t, http.MethodPost, "/v1/payments/"+id+"/captures", []byte(`{}`),
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": "rl-oa-c1"}),
		s.client.MustDo(t, http.MethodPost, "/v1/payments/"+id+"/voids", []byte(`{}`),
			map[string]string{"Content-Type": "application/json", "Idempotency-Key": "rl-oa-v1"}),
		s.client.MustGet(t, "/v1/captures/cap_none"),
		s.client.MustGet(t, "/v1/voids/void_none"),
		s.client.MustGet(t, "/v1/routing"),
		s.client.MustDo(t, http.MethodPut, "/v1/routing", []byte(`{"rules":[]}`), json),
		s.client.MustDo(t, http.MethodPost, "/v1/webhook_endpoints", []byte(`{"url":"https://shop.example/"}`), json),
		s.client.MustGet(t, "/v1/webhook_endpoints"),
		s.client.MustGet(t, "/v1/webhook_endpoints/we_none"),
		s.client.MustDo(t, http.MethodDelete, "/v1/webhook_endpoints/we_none", nil, nil),
		s.client.MustDo(t, http.MethodPost, "/v1/webhook_endpoints/we_none/rotate_secret", nil, nil),
		s.client.MustGet(t, "/v1/webhook_endpoints/we_none/deliveries"),
		s.client.MustDo(t, http.MethodPost, "/v1/webhook_deliveries/whd_none/retry", nil, nil),
	} {
		require.NoError(t, r.CheckProblem(429, "rate_limited"))
		require.GreaterOrEqual(t, r.RetryAfter(), 1, "%s", r)
	}
	for _, op := range []string{"POST /v1/payments 429", "GET /v1/payments 429", "GET /v1/payments/{id} 429",
		"POST /v1/payments/{id}/refunds 429", "GET /v1/payments/{id}/refunds 429", "GET /v1/refunds/{id} 429",
		"POST /v1/payments/{id}/captures 429", "POST /v1/payments/{id}/voids 429", "GET /v1/captures/{id} 429", "GET /v1/voids/{id} 429",
		"GET /v1/routing 429", "PUT /v1/routing 429",
		"POST /v1/webhook_endpoints 429", "GET /v1/webhook_endpoints 429", "GET /v1/webhook_endpoints/{id} 429",
		"DELETE /v1/webhook_endpoints/{id} 429", "POST /v1/webhook_endpoints/{id}/rotate_secret 429",
		"GET /v1/webhook_endpoints/{id}/deliveries 429", "POST /v1/webhook_deliveries/{id}/retry 429"} {
		v.mu.Lock()
		n := v.seen[op]
		v.mu.Unlock()
		require.Equal(t, 1, n, "%s validated against the document", op)
	}
}

// tooManyRules is a PUT /v1/routing body of 51 rules, one more than allowed.
func tooManyRules() string {
	rules := make([]string, 0, 51)
	for i := range 51 {
		currency := string(rune('A'+i/26)) + string(rune('A'+i%26)) + "X"
		rules = append(rules, `{"currency":"`+currency+`","providers":["sim"]}`)
	}
	return `{"rules":[` + strings.Join(rules, ",") + `]}`
}
