package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/testkit"
)

// endpointReq sends a request of the endpoints API as tenant, with a JSON
// body when body is not "".
func (b *bundle) endpointReq(tenant tenants.Created, method, path, body string, headers map[string]string) apiclient.Response {
	b.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + tenant.APIKey}
	if body != "" {
		h["Content-Type"] = "application/json"
	}
	for k, v := range headers {
		h[k] = v
	}
	return b.do(method, path, []byte(body), h)
}

// createEndpoint posts body as tenant with Idempotency-Key key ("": none).
func (b *bundle) createEndpoint(tenant tenants.Created, key, body string) apiclient.Response {
	b.t.Helper()
	return b.endpointReq(tenant, http.MethodPost, "/v1/webhook_endpoints", body, map[string]string{"Idempotency-Key": key})
}

func requireSecret(t *testing.T, s string) {
	t.Helper()
	raw, ok := strings.CutPrefix(s, "whsec_")
	require.True(t, ok, "%q starts with whsec_", s)
	key, err := base64.StdEncoding.Strict().DecodeString(raw)
	require.NoError(t, err, "standard padded base64")
	require.Len(t, key, 32)
}

// TestCreateWebhookEndpoint: a create answers 201 with the endpoint and
// its secret, shown only there (and in the replay of a repeat with the same
// key, which creates nothing); a read never shows it.
func TestCreateWebhookEndpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.createEndpoint(b.a, "", `{"url":"https://shop.example/hooks","event_types":["payment.succeeded","refund.succeeded"],"description":"orders"}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.True(t, strings.HasPrefix(r.Str("id"), "we_"), "%s", r)
	require.Equal(t, "https://shop.example/hooks", r.Str("url"))
	require.Equal(t, []any{"payment.succeeded", "refund.succeeded"}, r.JSON["event_types"])
	require.Equal(t, "orders", r.Str("description"))
	require.Equal(t, "enabled", r.Str("status"))
	requireSecret(t, r.Str("secret"))
	_, err := time.Parse(time.RFC3339, r.Str("created_at"))
	require.NoError(t, err)

	got := b.endpointReq(b.a, http.MethodGet, "/v1/webhook_endpoints/"+r.Str("id"), "", nil)
	require.Equal(t, http.StatusOK, got.Status, "%s", got)
	require.NotContains(t, got.JSON, "secret")
	require.NotContains(t, string(got.Raw), r.Str("secret"))
	want := map[string]any{}
	for k, v := range r.JSON {
		if k != "secret" {
			want[k] = v
		}
	}
	require.Equal(t, want, got.JSON)

	all := b.createEndpoint(b.a, "", `{"url":"https://shop.example/all"}`)
	require.Equal(t, http.StatusCreated, all.Status, "%s", all)
	require.Nil(t, all.JSON["event_types"], "no event_types: every type")
	require.Nil(t, all.JSON["description"])
	require.NotEqual(t, r.Str("secret"), all.Str("secret"))

	// With a key: the repeat replays the stored answer, secret included,
	// and creates nothing; a reordered body is the same request.
	body := `{"url":"https://shop.example/keyed","description":"keyed"}`
	first := b.createEndpoint(b.a, "ep-1", body)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first)
	require.False(t, first.Replayed())
	again := b.createEndpoint(b.a, "ep-1", `{"description":"keyed","url":"https://shop.example/keyed"}`)
	require.Equal(t, http.StatusCreated, again.Status, "%s", again)
	require.True(t, again.Replayed())
	require.JSONEq(t, string(first.Raw), string(again.Raw))
	require.Equal(t, 3, b.count(`SELECT count(*) FROM webhook_endpoints`))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM idempotency_keys WHERE endpoint_id = $1 AND response_code = 201`, first.Str("id")))
	// Another request with the key, a payment's key, and the same key of
	// another tenant (its own).
	require.NoError(t, b.createEndpoint(b.a, "ep-1", `{"url":"https://shop.example/other"}`).CheckProblem(422, "idempotency_key_reused"))
	paid := b.pay(b.a, "pay-key", visa("o-ep", 500))
	require.Equal(t, http.StatusCreated, paid.Status, "%s", paid)
	require.NoError(t, b.createEndpoint(b.a, "pay-key", body).CheckProblem(422, "idempotency_key_reused"))
	require.NoError(t, b.pay(b.a, "ep-1", visa("o-ep-2", 500)).CheckProblem(422, "idempotency_key_reused"))
	theirs := b.createEndpoint(b.b, "ep-1", body)
	require.Equal(t, http.StatusCreated, theirs.Status, "%s", theirs)
	require.False(t, theirs.Replayed())
	require.NotEqual(t, first.Str("id"), theirs.Str("id"))
	require.Equal(t, 4, b.count(`SELECT count(*) FROM webhook_endpoints`))
}

// TestWebhookEndpointValidation: 400 invalid_request for a URL that is not
// https://, an unknown or repeated event type, an empty list, a 17th
// endpoint, and the usual malformed requests; nothing is created.
func TestWebhookEndpointValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, body := range []string{
		`{"url":"http://shop.example/hooks"}`,
		`{"url":"ftp://shop.example/hooks"}`,
		`{"url":"shop.example/hooks"}`,
		`{"url":""}`,
		`{"url":"https://shop.example/","event_types":["payment.exploded"]}`,
		`{"url":"https://shop.example/","event_types":["payment.failed","payment.failed"]}`,
		`{"url":"https://shop.example/","event_types":[]}`,
		`{"url":"https://shop.example/","event_types":"payment.failed"}`,
		`{"url":"https://shop.example/","color":"red"}`,
		`{"url":"https://shop.example/","url":"https://elsewhere.example/"}`,
		`{"event_types":["payment.failed"]}`,
		`{"url":"https://shop.example/","description":"` + strings.Repeat("x", 1001) + `"}`,
		`{"url":`,
		`[]`,
	} {
		require.NoError(t, b.createEndpoint(b.a, "", body).CheckProblem(400, "invalid_request"), body)
	}
	require.Zero(t, b.count(`SELECT count(*) FROM webhook_endpoints`), "nothing created")
	require.Equal(t, http.StatusCreated, b.createEndpoint(b.a, "", `{"url":"https://shop.example/"}`).Status)
	require.NoError(t, b.createEndpoint(b.a, `"unterminated`, `{"url":"https://shop.example/"}`).CheckProblem(400, "idempotency_key_invalid"))
	require.NoError(t, b.endpointReq(b.a, http.MethodPost, "/v1/webhook_endpoints", "", map[string]string{"Content-Type": "text/plain"}).CheckProblem(415, "unsupported_media_type"))
	require.NoError(t, b.do(http.MethodPost, "/v1/webhook_endpoints", []byte(`{"url":"https://shop.example/"}`),
		map[string]string{"Content-Type": "application/json"}).CheckProblem(401, "unauthorized"))

	// The limit: 16 endpoints per tenant (the one above and 15 more); a
	// deleted one does not count.
	for i := range 15 {
		r := b.createEndpoint(b.a, "", `{"url":"https://shop.example/`+strconv.Itoa(i)+`"}`)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	}
	over := b.createEndpoint(b.a, "", `{"url":"https://shop.example/17"}`)
	require.NoError(t, over.CheckProblem(400, "invalid_request"))
	require.Contains(t, over.Str("detail"), "at most 16")
	require.Equal(t, 16, b.count(`SELECT count(*) FROM webhook_endpoints`))
	list := b.endpointReq(b.a, http.MethodGet, "/v1/webhook_endpoints?limit=1", "", nil)
	require.Equal(t, http.StatusOK, list.Status, "%s", list)
	id := list.JSON["data"].([]any)[0].(map[string]any)["id"].(string)
	require.Equal(t, http.StatusNoContent, b.endpointReq(b.a, http.MethodDelete, "/v1/webhook_endpoints/"+id, "", nil).Status)
	require.Equal(t, http.StatusCreated, b.createEndpoint(b.a, "", `{"url":"https://shop.example/17"}`).Status)
	require.Equal(t, http.StatusCreated, b.createEndpoint(b.b, "", `{"url":"https://shop.example/b"}`).Status, "the limit is per tenant")
}

// TestWebhookEndpointsReadsAndChanges: list (newest first, in pages), get,
// rotate, delete; another tenant's endpoint is 404 for every one of them.
func TestWebhookEndpointsReadsAndChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for i := range 3 {
		r := b.createEndpoint(b.a, "", `{"url":"https://shop.example/`+strconv.Itoa(i)+`"}`)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r)
		ids = append([]string{r.Str("id")}, ids...) // newest first
	}
	listIDs := func(path string) ([]string, bool) {
		t.Helper()
		r := b.endpointReq(b.a, http.MethodGet, path, "", nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		var out []string
		for _, item := range r.JSON["data"].([]any) {
			require.NotContains(t, item, "secret")
			out = append(out, item.(map[string]any)["id"].(string))
		}
		return out, r.JSON["has_more"].(bool)
	}
	got, more := listIDs("/v1/webhook_endpoints")
	require.Equal(t, ids, got)
	require.False(t, more)
	got, more = listIDs("/v1/webhook_endpoints?limit=2")
	require.Equal(t, ids[:2], got)
	require.True(t, more)
	got, more = listIDs("/v1/webhook_endpoints?limit=2&starting_after=" + ids[1])
	require.Equal(t, ids[2:], got)
	require.False(t, more)
	for _, q := range []string{"limit=0", "limit=101", "starting_after=", "starting_after=we_none"} {
		require.NoError(t, b.endpointReq(b.a, http.MethodGet, "/v1/webhook_endpoints?"+q, "", nil).CheckProblem(400, "invalid_request"), q)
	}
	empty := b.endpointReq(b.b, http.MethodGet, "/v1/webhook_endpoints", "", nil)
	require.JSONEq(t, `{"data":[],"has_more":false}`, string(empty.Raw))

	// Another tenant's id, and an unknown one: 404 everywhere.
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1/webhook_endpoints/" + ids[0]},
		{http.MethodDelete, "/v1/webhook_endpoints/" + ids[0]},
		{http.MethodPost, "/v1/webhook_endpoints/" + ids[0] + "/rotate_secret"},
		{http.MethodGet, "/v1/webhook_endpoints/" + ids[0] + "/deliveries"},
	} {
		require.NoError(t, b.endpointReq(b.b, tc.method, tc.path, "", nil).CheckProblem(404, "webhook_endpoint_not_found"), "%s %s", tc.method, tc.path)
		require.NoError(t, b.endpointReq(b.a, tc.method, strings.Replace(tc.path, ids[0], "we_none", 1), "", nil).CheckProblem(404, "webhook_endpoint_not_found"))
	}
	require.NoError(t, b.endpointReq(b.a, http.MethodGet, "/v1/webhook_endpoints?starting_after="+
		b.createEndpoint(b.b, "", `{"url":"https://b.example/"}`).Str("id"), "", nil).CheckProblem(400, "invalid_request"))

	// Rotate: a new secret each time; it takes no body, and one sent is
	// not read.
	rotated := b.endpointReq(b.a, http.MethodPost, "/v1/webhook_endpoints/"+ids[0]+"/rotate_secret", "", nil)
	require.Equal(t, http.StatusOK, rotated.Status, "%s", rotated)
	requireSecret(t, rotated.Str("secret"))
	require.Equal(t, ids[0], rotated.Str("id"))
	again := b.endpointReq(b.a, http.MethodPost, "/v1/webhook_endpoints/"+ids[0]+"/rotate_secret", "{}", nil)
	require.Equal(t, http.StatusOK, again.Status, "%s", again)
	require.NotEqual(t, rotated.Str("secret"), again.Str("secret"), "every call rotates")
	third := b.endpointReq(b.a, http.MethodPost, "/v1/webhook_endpoints/"+ids[0]+"/rotate_secret", `{"secret":"whsec_mine"}`, nil)
	require.Equal(t, http.StatusOK, third.Status, "%s", third)
	require.NotEqual(t, "whsec_mine", third.Str("secret"))
	requireSecret(t, third.Str("secret"))
	require.Equal(t, 3, b.count(`SELECT count(*) FROM webhook_endpoint_events WHERE endpoint_id = $1 AND kind = 'secret_rotated'`, ids[0]))

	// Delete: 204, then 404 for it; the others remain.
	del := b.endpointReq(b.a, http.MethodDelete, "/v1/webhook_endpoints/"+ids[0], "", nil)
	require.Equal(t, http.StatusNoContent, del.Status, "%s", del)
	require.Empty(t, del.Raw)
	require.NoError(t, b.endpointReq(b.a, http.MethodGet, "/v1/webhook_endpoints/"+ids[0], "", nil).CheckProblem(404, "webhook_endpoint_not_found"))
	require.NoError(t, b.endpointReq(b.a, http.MethodDelete, "/v1/webhook_endpoints/"+ids[0], "", nil).CheckProblem(404, "webhook_endpoint_not_found"))
	got, _ = listIDs("/v1/webhook_endpoints")
	require.Equal(t, ids[1:], got)
}

// TestWebhookDeliveriesAPI: an endpoint's deliveries, newest first; a
// manual retry of a pending one answers 202 and is made; a delivered one is
// 409; another tenant's delivery or an unknown one is 404.
func TestWebhookDeliveriesAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(status.Load())) }))
	t.Cleanup(rc.Close)
	// The API's own Endpoints refuse http://; the receiver is a local
	// http:// server, so this endpoint is made through a permissive one.
	ws, err := delivery.NewEndpoints(b.pool, delivery.EndpointsConfig{AllowHTTP: true}).Create(context.Background(),
		delivery.CreateRequest{New: delivery.New{TenantID: b.a.ID, URL: rc.URL}})
	require.NoError(t, err)
	var ep delivery.WithSecret
	require.NoError(t, json.Unmarshal(ws.Body, &ep))
	epID := ep.ID
	events := b.fanOut(b.a.ID, 3)
	deliverer, err := delivery.NewDeliverer(b.pool, delivery.Config{
		Timeout: 5 * time.Second, Schedule: []time.Duration{time.Hour}, PollInterval: 50 * time.Millisecond, AllowPrivate: true, AllowHTTP: true,
	})
	require.NoError(t, err)
	testkit.Background(t, deliverer.Run)

	path := "/v1/webhook_endpoints/" + epID + "/deliveries"
	var list apiclient.Response
	testkit.Eventually(t, 30*time.Second, "three first attempts", func() bool {
		list = b.endpointReq(b.a, http.MethodGet, path, "", nil)
		require.Equal(t, http.StatusOK, list.Status, "%s", list)
		for _, d := range list.JSON["data"].([]any) {
			if d.(map[string]any)["attempts"].(float64) != 1 {
				return false
			}
		}
		return len(list.JSON["data"].([]any)) == 3
	})
	seen := map[string]bool{}
	for _, item := range list.JSON["data"].([]any) {
		d := item.(map[string]any)
		require.True(t, strings.HasPrefix(d["id"].(string), "whd_"))
		require.Equal(t, epID, d["endpoint_id"])
		require.Equal(t, "payment.succeeded", d["event_type"])
		require.Equal(t, "pending", d["status"])
		require.EqualValues(t, 503, d["last_status_code"])
		require.Equal(t, "HTTP 503", d["last_error"])
		require.NotNil(t, d["next_attempt_at"])
		require.Nil(t, d["delivered_at"])
		seen[d["event_id"].(string)] = true
	}
	for _, e := range events {
		require.True(t, seen[e], e)
	}
	page := b.endpointReq(b.a, http.MethodGet, path+"?limit=2", "", nil)
	require.Len(t, page.JSON["data"], 2)
	require.Equal(t, true, page.JSON["has_more"])
	last := page.JSON["data"].([]any)[1].(map[string]any)["id"].(string)
	rest := b.endpointReq(b.a, http.MethodGet, path+"?starting_after="+last, "", nil)
	require.Len(t, rest.JSON["data"], 1)
	require.Equal(t, false, rest.JSON["has_more"])
	require.NoError(t, b.endpointReq(b.a, http.MethodGet, path+"?starting_after=whd_none", "", nil).CheckProblem(400, "invalid_request"))

	id := list.JSON["data"].([]any)[0].(map[string]any)["id"].(string)
	require.NoError(t, b.endpointReq(b.b, http.MethodPost, "/v1/webhook_deliveries/"+id+"/retry", "", nil).CheckProblem(404, "webhook_delivery_not_found"))
	require.NoError(t, b.endpointReq(b.a, http.MethodPost, "/v1/webhook_deliveries/whd_none/retry", "", nil).CheckProblem(404, "webhook_delivery_not_found"))
	status.Store(http.StatusOK)
	retried := b.endpointReq(b.a, http.MethodPost, "/v1/webhook_deliveries/"+id+"/retry", "", nil)
	require.Equal(t, http.StatusAccepted, retried.Status, "%s", retried)
	require.Equal(t, "pending", retried.Str("status"))
	require.EqualValues(t, 1, retried.JSON["attempts"])
	testkit.Eventually(t, 30*time.Second, "the retried delivery delivered", func() bool {
		for _, item := range b.endpointReq(b.a, http.MethodGet, path, "", nil).JSON["data"].([]any) {
			d := item.(map[string]any)
			if d["id"] == id {
				return d["status"] == "delivered" && d["attempts"].(float64) == 2 && d["next_attempt_at"] == nil && d["delivered_at"] != nil
			}
		}
		return false
	})
	require.NoError(t, b.endpointReq(b.a, http.MethodPost, "/v1/webhook_deliveries/"+id+"/retry", "", nil).CheckProblem(409, "webhook_delivery_delivered"))
}

// fanOut makes n PaymentSucceeded events of tenant and fans them out as the
// relay does, returning their ids.
func (b *bundle) fanOut(tenant string, n int) []string {
	b.t.Helper()
	pubs := make([]outbox.Published, n)
	ids := make([]string, n)
	var now time.Time
	require.NoError(b.t, b.pool.QueryRow(context.Background(), "SELECT now()").Scan(&now))
	for i := range pubs {
		ids[i] = testkit.RandomID("evt_")
		pubs[i] = outbox.Published{ID: ids[i], Type: outbox.TypePaymentSucceeded, PaymentID: "pay_x",
			Payload: []byte(`{"id":"pay_x","tenant_id":"` + tenant + `"}`), CreatedAt: now}
	}
	require.NoError(b.t, db.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		return delivery.NewFanout(nil)(context.Background(), tx, pubs)
	}))
	return ids
}
