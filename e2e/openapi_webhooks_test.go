package e2e

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	apispec "github.com/acme/paymentsvc/api"
	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestOpenAPIMerchantWebhooks runs every exchange of the merchant webhooks'
// API against a real pod and validates each request and response against
// api/openapi.yaml, as TestOpenAPIMatchesRealTraffic does for the rest, and
// every delivery the merchant's endpoint receives against the document's
// webhooks section (merchantEvent: its body's schema, its signature's form).
func TestOpenAPIMerchantWebhooks(t *testing.T) {
	t.Parallel()
	v := newSpecValidator(t, nil)
	s := setupOps(t, opsOptions{podEnv: whPodEnv(), transport: v.wrap})
	c, anon := s.client, s.anon
	var status atomic.Int32
	status.Store(http.StatusInternalServerError)
	event := merchantEventSchema(t)
	sigRE := regexp.MustCompile(`^v1,[A-Za-z0-9+/]{43}=( v1,[A-Za-z0-9+/]{43}=)?$`)
	var invalid atomic.Value
	rc := newWHReceiver(t, func(r *http.Request) int {
		if !sigRE.MatchString(r.Header.Get("webhook-signature")) {
			invalid.Store("webhook-signature " + r.Header.Get("webhook-signature"))
		}
		return int(status.Load())
	})
	post := func(cl *proctest.Client, path, body string, h map[string]string) apiclient.Response {
		t.Helper()
		headers := map[string]string{"Content-Type": "application/json"}
		for k, val := range h {
			headers[k] = val
		}
		return opsOK(t)(cl.Do(http.MethodPost, path, []byte(body), headers))
	}
	do := func(cl *proctest.Client, method, path string, h map[string]string) apiclient.Response {
		t.Helper()
		return opsOK(t)(cl.Do(method, path, nil, h))
	}

	// Create: 201 and its replay, 400s (each the document refuses where it
	// can tell), 401, 413, 415, 422.
	body := `{"url":"` + rc.URL + `/hooks","event_types":["payment.succeeded"],"description":"spec"}`
	created := post(c, "/v1/webhook_endpoints", body, map[string]string{"Idempotency-Key": "wh-oa-1"})
	require.Equal(t, http.StatusCreated, created.Status, "%s", created)
	rc.setSecret(t, created.Str("secret"))
	id := created.Str("id")
	replay := post(c, "/v1/webhook_endpoints", body, map[string]string{"Idempotency-Key": "wh-oa-1"})
	require.True(t, replay.Status == http.StatusCreated && replay.Replayed(), "%s", replay)
	require.JSONEq(t, string(created.Raw), string(replay.Raw))
	for _, bad := range []struct {
		body     string
		expected bool // the document can tell it is invalid
	}{
		{`{"url":"ftp://shop.example/hooks"}`, false},
		{`{"url":"https://shop.example/#top"}`, false},
		{`{"url":"https://shop.example/","event_types":["payment.exploded"]}`, true},
		{`{"url":"https://shop.example/","event_types":[]}`, true},
		{`{"url":"https://shop.example/","event_types":["payment.failed","payment.failed"]}`, true},
		{`{"url":"https://shop.example/","secret":"whsec_mine"}`, true},
		{`{"event_types":["payment.failed"]}`, true},
		{`{"url":`, true},
	} {
		var h map[string]string
		if bad.expected {
			h = rejected(nil)
		}
		opsProblem(t, post(c, "/v1/webhook_endpoints", bad.body, h), 400, "invalid_request")
	}
	opsProblem(t, post(c, "/v1/webhook_endpoints", body, rejected(map[string]string{"Idempotency-Key": `"unterminated`})), 400, "idempotency_key_invalid")
	opsProblem(t, post(c, "/v1/webhook_endpoints", `{"url":"https://shop.example/","description":"`+strings.Repeat("x", 70<<10)+`"}`, rejected(expectContinue)), 413, "payload_too_large")
	opsProblem(t, post(c, "/v1/webhook_endpoints", body, rejected(map[string]string{"Content-Type": "text/plain"})), 415, "unsupported_media_type")
	opsProblem(t, post(c, "/v1/webhook_endpoints", `{"url":"https://shop.example/other"}`, map[string]string{"Idempotency-Key": "wh-oa-1"}), 422, "idempotency_key_reused")
	opsProblem(t, post(anon, "/v1/webhook_endpoints", body, rejected(nil)), 401, "unauthorized")

	// Reads, rotation and deletion, with their 400s, 401s and 404s.
	spare := post(c, "/v1/webhook_endpoints", `{"url":"https://shop.example/spare"}`, nil)
	require.Equal(t, http.StatusCreated, spare.Status, "%s", spare)
	list := do(c, http.MethodGet, "/v1/webhook_endpoints?limit=1", nil)
	require.Equal(t, http.StatusOK, list.Status, "%s", list)
	require.Equal(t, true, list.JSON["has_more"])
	opsProblem(t, do(c, http.MethodGet, "/v1/webhook_endpoints?limit=0", rejected(nil)), 400, "invalid_request")
	opsProblem(t, do(c, http.MethodGet, "/v1/webhook_endpoints?starting_after=we_none", nil), 400, "invalid_request")
	opsProblem(t, do(anon, http.MethodGet, "/v1/webhook_endpoints", rejected(nil)), 401, "unauthorized")
	got := do(c, http.MethodGet, "/v1/webhook_endpoints/"+id, nil)
	require.Equal(t, http.StatusOK, got.Status, "%s", got)
	opsProblem(t, do(c, http.MethodGet, "/v1/webhook_endpoints/we_none", nil), 404, "webhook_endpoint_not_found")
	opsProblem(t, do(anon, http.MethodGet, "/v1/webhook_endpoints/"+id, rejected(nil)), 401, "unauthorized")
	rotated := do(c, http.MethodPost, "/v1/webhook_endpoints/"+spare.Str("id")+"/rotate_secret", nil)
	require.Equal(t, http.StatusOK, rotated.Status, "%s", rotated)
	opsProblem(t, do(c, http.MethodPost, "/v1/webhook_endpoints/we_none/rotate_secret", nil), 404, "webhook_endpoint_not_found")
	opsProblem(t, do(anon, http.MethodPost, "/v1/webhook_endpoints/"+id+"/rotate_secret", rejected(nil)), 401, "unauthorized")
	require.Equal(t, http.StatusNoContent, do(c, http.MethodDelete, "/v1/webhook_endpoints/"+spare.Str("id"), nil).Status)
	opsProblem(t, do(c, http.MethodDelete, "/v1/webhook_endpoints/"+spare.Str("id"), nil), 404, "webhook_endpoint_not_found")
	opsProblem(t, do(anon, http.MethodDelete, "/v1/webhook_endpoints/"+id, rejected(nil)), 401, "unauthorized")

	// Deliveries: a payment's event, refused by the receiver until the
	// schedule is spent (failed), retried by hand (202) and delivered, then
	// 409 for another retry.
	pay := c.MustPay(t, "wh-oa-pay", apiclient.Visa("o-wh-oa", 500))
	require.Equal(t, http.StatusCreated, pay.Status, "%s", pay)
	path := "/v1/webhook_endpoints/" + id + "/deliveries"
	delivery := func() map[string]any {
		t.Helper()
		r := do(c, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		data := r.JSON["data"].([]any)
		if len(data) == 0 {
			return nil
		}
		return data[0].(map[string]any)
	}
	testkit.Eventually(t, time.Minute, "the delivery failed after its schedule", func() bool {
		d := delivery()
		return d != nil && d["status"] == "failed"
	})
	opsProblem(t, do(c, http.MethodGet, path+"?limit=101", rejected(nil)), 400, "invalid_request")
	opsProblem(t, do(c, http.MethodGet, "/v1/webhook_endpoints/we_none/deliveries", nil), 404, "webhook_endpoint_not_found")
	opsProblem(t, do(anon, http.MethodGet, path, rejected(nil)), 401, "unauthorized")
	whd := delivery()["id"].(string)
	status.Store(http.StatusOK)
	retried := do(c, http.MethodPost, "/v1/webhook_deliveries/"+whd+"/retry", nil)
	require.Equal(t, http.StatusAccepted, retried.Status, "%s", retried)
	testkit.Eventually(t, time.Minute, "the retried delivery delivered", func() bool { return delivery()["status"] == "delivered" })
	opsProblem(t, do(c, http.MethodPost, "/v1/webhook_deliveries/"+whd+"/retry", nil), 409, "webhook_delivery_delivered")
	opsProblem(t, do(c, http.MethodPost, "/v1/webhook_deliveries/whd_none/retry", nil), 404, "webhook_delivery_not_found")
	opsProblem(t, do(anon, http.MethodPost, "/v1/webhook_deliveries/"+whd+"/retry", rejected(nil)), 401, "unauthorized")

	// What the endpoint received, against the webhooks section.
	rc.requireEach(t, []string{pay.Str("id")})
	for _, ev := range rc.accepted() {
		require.NoError(t, event.VisitJSON(ev), "a delivery's body against MerchantEvent")
	}
	require.Nil(t, invalid.Load())

	v.requireCovered(t, append(skipOtherPaths(v, merchantWebhookPaths), "* * 500", "* * 503", "* * 429")...)
}

// merchantEventSchema is the body schema of the document's merchantEvent
// webhook.
func merchantEventSchema(t *testing.T) *openapi3.Schema {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(apispec.OpenAPI)
	require.NoError(t, err)
	hook, ok := doc.Webhooks["merchantEvent"]
	require.True(t, ok, "api/openapi.yaml has a merchantEvent webhook")
	schema := hook.Post.RequestBody.Value.Content.Get("application/json").Schema.Value
	require.NotNil(t, schema)
	return schema
}

// skipOtherPaths are requireCovered skips of every documented path but
// paths.
func skipOtherPaths(v *specValidator, paths []string) []string {
	var out []string
	for p := range v.doc.Paths.Map() {
		if !slices.Contains(paths, p) {
			out = append(out, "* "+p+" *")
		}
	}
	return out
}
