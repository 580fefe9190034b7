package api_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// refund posts a refund body as tenant for payment id with idempotency key.
func (b *bundle) refund(tenant tenants.Created, id, key, body string) apiclient.Response {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/payments/"+id+"/refunds", []byte(body), map[string]string{
		"Authorization": "Bearer " + tenant.APIKey, "Idempotency-Key": key, "Content-Type": "application/json",
	})
}

// paid is a SUCCEEDED payment of amount for tenant a.
func (b *bundle) paid(order string, amount int64) string {
	b.t.Helper()
	r := b.pay(b.a, "pay-"+order, visa(order, amount))
	require.Equal(b.t, http.StatusCreated, r.Status, "%s", r)
	return r.Str("id")
}

func (b *bundle) count(sql string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), sql, args...).Scan(&n))
	return n
}

// TestRefundFullAndPartial: partial refunds add up on the payment, the
// default takes the whole rest, and a refund leaves the payment SUCCEEDED.
func TestRefundFullAndPartial(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.paid("o-1", 1000)

	r := b.refund(b.a, id, "r-1", `{"amount":300,"reason":"requested_by_customer","metadata":{"ticket":"T-1"}}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.Equal(t, "SUCCEEDED", r.Str("status"))
	require.EqualValues(t, 300, r.JSON["amount"])
	require.Equal(t, "USD", r.Str("currency"))
	require.Equal(t, id, r.Str("payment_id"))
	require.Equal(t, "sim", r.Str("provider"))
	require.Equal(t, "requested_by_customer", r.Str("reason"))
	require.Equal(t, map[string]any{"ticket": "T-1"}, r.JSON["metadata"])
	require.NotEmpty(t, r.Str("provider_refund_id"))
	require.Nil(t, r.JSON["failure_code"])
	first := r.Str("id")

	p := b.get(b.a, "/v1/payments/"+id)
	require.Equal(t, "SUCCEEDED", p.Str("status"))
	require.EqualValues(t, 300, p.JSON["amount_refunded"])
	require.EqualValues(t, 700, p.JSON["amount_refundable"])

	r = b.refund(b.a, id, "r-2", `{}`) // the whole rest
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.EqualValues(t, 700, r.JSON["amount"])
	require.Equal(t, map[string]any{}, r.JSON["metadata"])
	require.Nil(t, r.JSON["reason"])

	p = b.get(b.a, "/v1/payments/"+id)
	require.Equal(t, "SUCCEEDED", p.Str("status"))
	require.EqualValues(t, 1000, p.JSON["amount_refunded"])
	require.EqualValues(t, 0, p.JSON["amount_refundable"])

	// Nothing left: 422 with the rest in the detail, nothing stored.
	r = b.refund(b.a, id, "r-3", `{"amount":1}`)
	require.NoError(t, r.CheckProblem(http.StatusUnprocessableEntity, "refund_exceeds_refundable"))
	require.Contains(t, r.Str("detail"), "0")
	require.Equal(t, 0, b.count(`SELECT count(*) FROM idempotency_keys WHERE key = 'r-3'`))

	got := b.get(b.a, "/v1/refunds/"+first)
	require.Equal(t, http.StatusOK, got.Status)
	require.Equal(t, "SUCCEEDED", got.Str("status"))
	require.Equal(t, 2, b.count(`SELECT count(*) FROM outbox WHERE type = 'PaymentRefunded' AND payment_id = $1`, id))
	require.Equal(t, 2, b.count(`SELECT count(*) FROM refund_events WHERE to_status = 'SUCCEEDED'`))
}

// GET /v1/refunds/{id} reads ?sync as GET /v1/payments/{id} does: the
// spellings of strconv.ParseBool, anything else 400 invalid_request naming
// sync, before the refund is looked up.
func TestGetRefundSyncSpellings(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.refund(b.a, b.paid("o-1", 1000), "r-1", `{"amount":300}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	id := r.Str("id")
	for _, ok := range []string{"", "?sync=1", "?sync=t", "?sync=TRUE", "?sync=0", "?sync=False"} {
		got := b.get(b.a, "/v1/refunds/"+id+ok)
		require.Equal(t, http.StatusOK, got.Status, "%q: %s", ok, got)
		require.Equal(t, "SUCCEEDED", got.Str("status"), "%q", ok)
	}
	for _, bad := range []string{"?sync=yes", "?sync=", "?sync=-1"} {
		for _, rid := range []string{id, "rfd_doesnotexist"} {
			p := b.get(b.a, "/v1/refunds/"+rid+bad)
			require.NoError(t, p.CheckProblem(http.StatusBadRequest, "invalid_request"), "%s%s", rid, bad)
			require.Contains(t, p.Str("detail"), "sync", "%q", bad)
		}
	}
}

// TestRefundWithoutABody: every field is optional, so a request with no
// body at all (no Content-Type either) is {}: the whole rest, and the same
// request as {} for its key.
func TestRefundWithoutABody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.paid("o-1", 1000)
	path := "/v1/payments/" + id + "/refunds"
	auth := "Bearer " + b.a.APIKey

	r := b.do(http.MethodPost, path, nil, map[string]string{"Authorization": auth, "Idempotency-Key": "r-empty"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.EqualValues(t, 1000, r.JSON["amount"])
	first := r.Str("id")

	again := b.refund(b.a, id, "r-empty", `{}`)
	require.Equal(t, http.StatusCreated, again.Status, "%s", again)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first, again.Str("id"))
	require.NoError(t, b.refund(b.a, id, "r-empty", `{"amount":1000}`).CheckProblem(http.StatusUnprocessableEntity, "idempotency_key_reused"))

	// Sent chunked (no Content-Length) and empty: the same.
	id2 := b.paid("o-2", 700)
	req, err := http.NewRequest(http.MethodPost, b.url+"/v1/payments/"+id2+"/refunds", io.MultiReader())
	require.NoError(t, err)
	req.Header.Set("Authorization", auth)
	req.Header.Set("Idempotency-Key", "r-chunked")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	p := b.get(b.a, "/v1/payments/"+id2)
	require.EqualValues(t, 700, p.JSON["amount_refunded"])

	// A body that is there is still checked: no Content-Type, 415.
	r = b.do(http.MethodPost, path, []byte(`{}`), map[string]string{"Authorization": auth, "Idempotency-Key": "r-415"})
	require.NoError(t, r.CheckProblem(http.StatusUnsupportedMediaType, "unsupported_media_type"))
	require.Equal(t, 2, b.count(`SELECT count(*) FROM refunds`))
}

// TestRefundRefusals: each refusal has its exact status and code, and keeps
// nothing (no key, no refund, no reservation).
func TestRefundRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.paid("o-1", 1000)
	declined := b.pay(b.a, "k-declined", body(map[string]any{"order_id": "o-2", "amount": 500, "currency": "USD", "payment_method": "pm_card_declined"}))
	require.Equal(t, http.StatusPaymentRequired, declined.Status)

	cases := []struct {
		name, id, body string
		tenant         tenants.Created
		Status         int
		code           string
	}{
		{"over the amount", id, `{"amount":1001}`, b.a, 422, "refund_exceeds_refundable"},
		{"zero", id, `{"amount":0}`, b.a, 400, "invalid_request"},
		{"negative", id, `{"amount":-5}`, b.a, 400, "invalid_request"},
		{"string amount", id, `{"amount":"5"}`, b.a, 400, "invalid_request"},
		{"bad reason", id, `{"reason":"because"}`, b.a, 400, "invalid_request"},
		{"unknown field", id, `{"amount":5,"charge":"x"}`, b.a, 400, "invalid_request"},
		{"amount twice", id, `{"amount":5,"amount":500}`, b.a, 400, "invalid_request"},
		{"unknown payment", "pay_nobody", `{"amount":5}`, b.a, 404, "payment_not_found"},
		{"another tenant's payment", id, `{"amount":5}`, b.b, 404, "payment_not_found"},
		{"a FAILED payment", declined.Str("id"), `{"amount":5}`, b.a, 409, "payment_not_refundable"},
	}
	for i, c := range cases {
		r := b.refund(c.tenant, c.id, fmt.Sprintf("refusal-%d", i), c.body)
		require.NoError(t, r.CheckProblem(c.Status, c.code), c.name)
	}
	require.Equal(t, 0, b.count(`SELECT count(*) FROM refunds`))
	require.Equal(t, 0, b.count(`SELECT count(*) FROM idempotency_keys WHERE refund_id IS NOT NULL`))
	require.Equal(t, 0, b.count(`SELECT count(*) FROM payment_attempts WHERE amount_reserved <> 0`))
	// A refused key is not stored: the same key works once the cause is gone.
	r := b.refund(b.a, id, "refusal-0", `{"amount":1000}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
}

// TestRefundReplayAndKeyReuse: the same key and body replays; the same key
// with another body, on another payment, or a payment's key used for a
// refund answers 422; one key space per tenant.
func TestRefundReplayAndKeyReuse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.paid("o-1", 1000)
	other := b.paid("o-2", 1000)

	first := b.refund(b.a, id, "rk", `{"amount":100}`)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first)
	again := b.refund(b.a, id, "rk", `{ "amount" : 100 }`)
	require.Equal(t, http.StatusCreated, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.JSONEq(t, string(first.Raw), string(again.Raw))

	require.NoError(t, b.refund(b.a, id, "rk", `{"amount":200}`).CheckProblem(422, "idempotency_key_reused"))
	require.NoError(t, b.refund(b.a, other, "rk", `{"amount":100}`).CheckProblem(422, "idempotency_key_reused"))
	require.NoError(t, b.refund(b.a, id, "pay-o-1", `{"amount":100}`).CheckProblem(422, "idempotency_key_reused"))
	require.NoError(t, b.pay(b.a, "rk", visa("o-3", 100)).CheckProblem(422, "idempotency_key_reused"))
	// Tenant b's "rk" is another key: its refund of a's payment is a 404.
	require.NoError(t, b.refund(b.b, id, "rk", `{"amount":100}`).CheckProblem(404, "payment_not_found"))

	require.Equal(t, 1, b.count(`SELECT count(*) FROM refunds`))
	p := b.get(b.a, "/v1/payments/"+id)
	require.EqualValues(t, 100, p.JSON["amount_refunded"])
}

// TestConcurrentRefundsNeverExceedThePayment releases 30 partial refunds of
// one payment together: exactly as many as fit succeed, the others are
// refused 422, and what was refunded never exceeds the payment.
func TestConcurrentRefundsNeverExceedThePayment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.paid("o-1", 10_000)
	const n, each = 30, 500 // 15,000 asked for, 10,000 to give
	statuses := make([]int, n)
	testkit.Together(n, func(i int) {
		statuses[i] = b.refund(b.a, id, fmt.Sprintf("cr-%d", i), fmt.Sprintf(`{"amount":%d}`, each)).Status
	})
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	require.Equal(t, map[int]int{201: 20, 422: 10}, count)
	require.Equal(t, 10_000, b.count(`SELECT COALESCE(sum(amount), 0) FROM refunds WHERE payment_id = $1 AND status <> 'FAILED'`, id))
	p := b.get(b.a, "/v1/payments/"+id)
	require.EqualValues(t, 10_000, p.JSON["amount_refunded"])
	require.EqualValues(t, 0, p.JSON["amount_refundable"])
}

// TestListsPageByCursor pages through 250 payments of a tenant, and a
// payment's refunds: every item once, newest first, another tenant's never.
func TestListsPageByCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// 250 of a's payments and 40 of b's, straight into the table; groups of
	// five share a created_at, so ties are ordered by id.
	_, err := b.pool.Exec(t.Context(), `
		INSERT INTO payment_attempts (id, tenant_id, order_id, idempotency_key, amount, currency, payment_method, status, created_at)
		SELECT 'pay_l' || lpad(g::text, 4, '0'), $1, 'o-' || (g % 7), 'k' || g, 100, 'USD', 'pm_card_visa',
		       CASE WHEN g <= 7 THEN 'SUCCEEDED' ELSE 'FAILED' END,
		       now() - (g / 5) * interval '1 second'
		FROM generate_series(1, 250) AS g`, b.a.ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(t.Context(), `
		INSERT INTO payment_attempts (id, tenant_id, order_id, idempotency_key, amount, currency, payment_method, status)
		SELECT 'pay_other' || g, $1, 'o-1', 'k' || g, 100, 'USD', 'pm_card_visa', 'FAILED' FROM generate_series(1, 40) AS g`, b.b.ID)
	require.NoError(t, err)

	seen := pageAll(t, b, b.a, "/v1/payments?limit=7")
	require.Len(t, seen, 250)
	want := b.ids(`SELECT id FROM payment_attempts WHERE tenant_id = $1 ORDER BY created_at DESC, id DESC`, b.a.ID)
	require.Equal(t, want, seen, "every payment once, newest first")

	byOrder := pageAll(t, b, b.a, "/v1/payments?order_id=o-3&limit=10")
	require.Equal(t, b.ids(`SELECT id FROM payment_attempts WHERE tenant_id = $1 AND order_id = 'o-3' ORDER BY created_at DESC, id DESC`, b.a.ID), byOrder)

	first := b.get(b.a, "/v1/payments")
	require.Len(t, first.JSON["data"], 10, "the default limit")
	require.Equal(t, true, first.JSON["has_more"])
	require.NoError(t, b.get(b.a, "/v1/payments?limit=101").CheckProblem(400, "invalid_request"))
	require.NoError(t, b.get(b.a, "/v1/payments?limit=x").CheckProblem(400, "invalid_request"))
	require.NoError(t, b.get(b.a, "/v1/payments?starting_after=pay_other1").CheckProblem(400, "invalid_request"), "another tenant's cursor")

	// A payment's refunds.
	id := b.paid("o-r", 10_000)
	for i := range 12 {
		require.Equal(t, http.StatusCreated, b.refund(b.a, id, fmt.Sprintf("lr-%d", i), `{"amount":10}`).Status)
	}
	refundIDs := pageAll(t, b, b.a, "/v1/payments/"+id+"/refunds?limit=5")
	require.Equal(t, b.ids(`SELECT id FROM refunds WHERE payment_id = $1 ORDER BY created_at DESC, id DESC`, id), refundIDs)
	require.NoError(t, b.get(b.b, "/v1/payments/"+id+"/refunds").CheckProblem(404, "payment_not_found"))
	require.NoError(t, b.get(b.a, "/v1/payments/"+id+"/refunds?starting_after="+seen[0]).CheckProblem(400, "invalid_request"))
	require.NoError(t, b.get(b.b, "/v1/refunds/"+refundIDs[0]).CheckProblem(404, "refund_not_found"))
	require.NoError(t, b.get(b.a, "/v1/refunds/rfd_nobody").CheckProblem(404, "refund_not_found"))
}

// pageAll follows has_more and starting_after from path and returns the ids.
func pageAll(t *testing.T, b *bundle, tenant tenants.Created, path string) []string {
	t.Helper()
	var ids []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "paging never ends")
		p := path
		if after != "" {
			p += "&starting_after=" + after
		}
		r := b.get(tenant, p)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		data := r.JSON["data"].([]any)
		for _, d := range data {
			ids = append(ids, d.(map[string]any)["id"].(string))
		}
		if r.JSON["has_more"] != true {
			return ids
		}
		require.NotEmpty(t, data)
		after = ids[len(ids)-1]
	}
}

func (b *bundle) ids(sql string, args ...any) []string {
	b.t.Helper()
	return testdb.Strings[string](b.t.Context(), b.t, b.pool, sql, args...)
}

// TestRefundedEventCarriesThePaymentsAmountRefunded: each PaymentRefunded
// event carries the payment's amount_refunded as its refund left it.
func TestRefundedEventCarriesThePaymentsAmountRefunded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.paid("o-1", 1000)
	r := b.refund(b.a, id, "r-1", `{"amount":300}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	r = b.refund(b.a, id, "r-2", `{}`)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)

	rows, err := b.pool.Query(b.t.Context(),
		`SELECT (payload->>'amount')::bigint, (payload->>'amount_refunded')::bigint FROM outbox
		 WHERE type = 'PaymentRefunded' AND payment_id = $1 ORDER BY 2`, id)
	require.NoError(t, err)
	var got [][2]int64
	for rows.Next() {
		var amount, refunded int64
		require.NoError(t, rows.Scan(&amount, &refunded))
		got = append(got, [2]int64{amount, refunded})
	}
	require.NoError(t, rows.Err())
	require.Equal(t, [][2]int64{{300, 300}, {700, 1000}}, got)
}
