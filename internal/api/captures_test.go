package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/tenants"
	"github.com/acme/paymentsvc/internal/testkit"
)

// hold posts to /v1/payments/{id}/<what> (captures or voids) as tenant with
// key; body nil sends none.
func (b *bundle) hold(tenant tenants.Created, id, what, key string, body []byte) apiclient.Response {
	b.t.Helper()
	h := map[string]string{"Authorization": "Bearer " + tenant.APIKey, "Idempotency-Key": key}
	if body != nil {
		h["Content-Type"] = "application/json"
	}
	return b.do(http.MethodPost, "/v1/payments/"+id+"/"+what, body, h)
}

// authorized is an AUTHORIZED payment of amount for tenant a.
func (b *bundle) authorized(order string, amount int64) string {
	b.t.Helper()
	r := b.pay(b.a, "pay-"+order, body(map[string]any{
		"order_id": order, "amount": amount, "currency": "USD", "payment_method": "pm_card_visa", "capture_method": "manual",
	}))
	require.Equal(b.t, http.StatusCreated, r.Status, "%s", r)
	require.Equal(b.t, "AUTHORIZED", r.Str("status"))
	return r.Str("id")
}

func TestManualCreateAnswers201Authorized(t *testing.T) {
	t.Parallel()
	b := setup(t)
	f := validFields()
	f["capture_method"] = "manual"
	r := b.pay(b.a, "k-1", body(f))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.Equal(t, "AUTHORIZED", r.Str("status"))
	require.Equal(t, "manual", r.Str("capture_method"))
	require.EqualValues(t, 500, r.JSON["amount_capturable"])
	require.EqualValues(t, 0, r.JSON["amount_captured"])
	require.EqualValues(t, 0, r.JSON["amount_refundable"])
	require.NotEmpty(t, r.Str("capture_before"))
	require.Nil(t, r.JSON["canceled_reason"])

	// The fingerprint covers the body as sent: automatic spelled out is
	// another request than capture_method left out, and manual another still.
	delete(f, "capture_method")
	require.NoError(t, b.pay(b.a, "k-1", body(f)).CheckProblem(http.StatusUnprocessableEntity, "idempotency_key_reused"))
	f["capture_method"] = "automatic"
	require.NoError(t, b.pay(b.a, "k-1", body(f)).CheckProblem(http.StatusUnprocessableEntity, "idempotency_key_reused"))
	f["order_id"] = "o-2"
	auto := b.pay(b.a, "k-2", body(f))
	require.Equal(t, http.StatusCreated, auto.Status)
	require.Equal(t, "SUCCEEDED", auto.Str("status"))
	require.Equal(t, "automatic", auto.Str("capture_method"))
	require.EqualValues(t, 500, auto.JSON["amount_captured"])
	require.Nil(t, auto.JSON["capture_before"])

	f["capture_method"] = "later"
	r = b.pay(b.a, "k-3", body(f))
	require.NoError(t, r.CheckProblem(http.StatusBadRequest, "invalid_request"))
	require.Contains(t, r.Str("detail"), "capture_method")

	// AUTHORIZED holds the order.
	held := b.pay(b.a, "k-4", visa("o-1", 500))
	require.NoError(t, held.CheckProblem(http.StatusConflict, "order_already_has_payment"))
}

func TestCaptureAndVoidAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.authorized("o-1", 1000)

	// Validation comes first, then the key, then the payment.
	for _, bad := range []string{`{"amount":0}`, `{"amount":-5}`, `{"amount":"5"}`, `{"amount":1.5}`, `{"amount":5,"x":1}`} {
		r := b.hold(b.a, id, "captures", "cap-1", []byte(bad))
		require.NoError(t, r.CheckProblem(http.StatusBadRequest, "invalid_request"), bad)
	}
	require.Contains(t, b.hold(b.a, id, "captures", "cap-1", []byte(`{"amount":0}`)).Str("detail"), "amount")
	require.NoError(t, b.hold(b.a, id, "voids", "void-1", []byte(`{"reason":"bored"}`)).CheckProblem(http.StatusBadRequest, "invalid_request"))
	require.NoError(t, b.hold(b.a, id, "captures", "", []byte(`{}`)).CheckProblem(http.StatusBadRequest, "idempotency_key_missing"))
	require.NoError(t, b.hold(b.a, "pay_nope", "captures", "cap-x", nil).CheckProblem(http.StatusNotFound, "payment_not_found"))
	require.NoError(t, b.hold(b.b, id, "captures", "cap-x", nil).CheckProblem(http.StatusNotFound, "payment_not_found"), "another tenant's payment")
	r := b.hold(b.a, id, "captures", "cap-1", []byte(`{"amount":1001}`))
	require.NoError(t, r.CheckProblem(http.StatusUnprocessableEntity, "capture_exceeds_authorized"))
	require.Contains(t, r.Str("detail"), "1000")
	require.NoError(t, b.hold(b.a, id, "captures", "pay-o-1", nil).CheckProblem(http.StatusUnprocessableEntity, "idempotency_key_reused"), "the payment's own key")

	r = b.hold(b.a, id, "captures", "cap-1", []byte(`{"amount":600}`))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.Equal(t, "SUCCEEDED", r.Str("status"))
	require.EqualValues(t, 600, r.JSON["amount"])
	require.Equal(t, "USD", r.Str("currency"))
	require.Equal(t, id, r.Str("payment_id"))
	require.Equal(t, "sim", r.Str("provider"))
	require.Nil(t, r.JSON["failure_code"])
	capture := r.Str("id")

	p := b.get(b.a, "/v1/payments/"+id)
	require.Equal(t, "SUCCEEDED", p.Str("status"))
	require.EqualValues(t, 600, p.JSON["amount_captured"])
	require.EqualValues(t, 0, p.JSON["amount_capturable"])
	require.EqualValues(t, 600, p.JSON["amount_refundable"])
	require.Nil(t, p.JSON["capture_before"])

	// A replay answers what was stored, whatever the payment is now.
	again := b.hold(b.a, id, "captures", "cap-1", []byte(`{"amount":600}`))
	require.Equal(t, http.StatusCreated, again.Status)
	require.True(t, again.Replayed())
	require.Equal(t, r.Raw, again.Raw)
	require.NoError(t, b.hold(b.a, id, "captures", "cap-1", []byte(`{"amount":500}`)).CheckProblem(http.StatusUnprocessableEntity, "idempotency_key_reused"))
	require.NoError(t, b.hold(b.a, id, "captures", "cap-2", nil).CheckProblem(http.StatusConflict, "payment_not_capturable"))
	require.NoError(t, b.hold(b.a, id, "voids", "void-1", nil).CheckProblem(http.StatusConflict, "payment_not_voidable"))

	got := b.get(b.a, "/v1/captures/"+capture)
	require.Equal(t, http.StatusOK, got.Status)
	require.Equal(t, "SUCCEEDED", got.Str("status"))
	require.Equal(t, http.StatusOK, b.get(b.a, "/v1/captures/"+capture+"?sync=true").Status)
	require.NoError(t, b.get(b.b, "/v1/captures/"+capture).CheckProblem(http.StatusNotFound, "capture_not_found"))
	require.NoError(t, b.get(b.a, "/v1/voids/"+capture).CheckProblem(http.StatusNotFound, "void_not_found"), "a capture is no void")

	// The refundable rest is what was captured.
	require.NoError(t, b.refund(b.a, id, "r-1", `{"amount":601}`).CheckProblem(http.StatusUnprocessableEntity, "refund_exceeds_refundable"))
	require.Equal(t, http.StatusCreated, b.refund(b.a, id, "r-2", `{}`).Status)
	require.EqualValues(t, 600, b.get(b.a, "/v1/payments/"+id).JSON["amount_refunded"])
}

func TestVoidAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.authorized("o-1", 500)
	r := b.hold(b.a, id, "voids", "void-1", nil) // no body is {}
	require.Equal(t, http.StatusCreated, r.Status, "%s", r)
	require.Equal(t, "SUCCEEDED", r.Str("status"))
	require.Nil(t, r.JSON["reason"])
	require.NotContains(t, r.JSON, "amount")
	again := b.hold(b.a, id, "voids", "void-1", []byte(`{}`))
	require.True(t, again.Replayed(), "no body and {} are the same request")
	p := b.get(b.a, "/v1/payments/"+id)
	require.Equal(t, "CANCELED", p.Str("status"))
	require.Nil(t, p.JSON["canceled_reason"], "a void without a reason")
	require.Equal(t, http.StatusOK, b.get(b.a, "/v1/voids/"+r.Str("id")).Status)
	require.NoError(t, b.get(b.a, "/v1/captures/"+r.Str("id")).CheckProblem(http.StatusNotFound, "capture_not_found"))

	other := b.authorized("o-2", 500)
	r = b.hold(b.a, other, "voids", "void-2", []byte(`{"reason":"fraudulent"}`))
	require.Equal(t, "fraudulent", r.Str("reason"))
	require.Equal(t, "fraudulent", b.get(b.a, "/v1/payments/"+other).Str("canceled_reason"))
	// A CANCELED payment frees its order.
	require.Equal(t, http.StatusCreated, b.pay(b.a, "k-again", visa("o-2", 500)).Status)
}

// TestRefusedCaptureAnswers402 and expiry learnt by ?sync=true.
func TestRefusedCaptureAnswers402(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.authorized("o-1", 500)
	b.sim.Expire(t, b.get(b.a, "/v1/payments/"+id).Str("provider_charge_id"))
	r := b.hold(b.a, id, "captures", "cap-1", nil)
	require.Equal(t, http.StatusPaymentRequired, r.Status, "%s", r)
	require.Equal(t, "FAILED", r.Str("status"))
	require.Equal(t, "authorization_expired", r.Str("failure_code"))
	p := b.get(b.a, "/v1/payments/"+id)
	require.Equal(t, "CANCELED", p.Str("status"))
	require.Equal(t, "expired", p.Str("canceled_reason"))

	synced := b.authorized("o-2", 500)
	b.sim.Expire(t, b.get(b.a, "/v1/payments/"+synced).Str("provider_charge_id"))
	require.Equal(t, "AUTHORIZED", b.get(b.a, "/v1/payments/"+synced).Str("status"), "not asked without sync")
	p = b.get(b.a, "/v1/payments/"+synced+"?sync=true")
	require.Equal(t, "CANCELED", p.Str("status"))
	require.Equal(t, "expired", p.Str("canceled_reason"))
}

// TestUnknownCaptureAnswers202: a lost answer is 202 UNKNOWN, resumable;
// ?sync=true resolves it.
func TestUnknownCaptureAnswers202(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.authorized("o-1", 500)
	b.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true, Captures: true})
	r := b.hold(b.a, id, "captures", "cap-1", nil)
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r)
	require.Equal(t, "UNKNOWN", r.Str("status"))
	require.Equal(t, "AUTHORIZED", b.get(b.a, "/v1/payments/"+id).Str("status"))
	b.sim.ClearFaults(t)
	// The lost answers may have opened the breaker (its cooldown is 1s):
	// a sync that cannot ask answers what is known, UNKNOWN.
	testkit.Eventually(t, 20*time.Second, "?sync=true resolves the capture", func() bool {
		return b.get(b.a, "/v1/captures/"+r.Str("id")+"?sync=true").Str("status") == "SUCCEEDED"
	})
	require.Equal(t, "SUCCEEDED", b.get(b.a, "/v1/payments/"+id).Str("status"))
	again := b.hold(b.a, id, "captures", "cap-1", nil)
	require.Equal(t, http.StatusCreated, again.Status)
	require.True(t, again.Replayed())
	ch := b.sim.Charge(t, b.get(b.a, "/v1/payments/"+id).Str("provider_charge_id"))
	require.Equal(t, "psvc_"+r.Str("id"), *ch.CaptureKey, "captured once, under the capture's key")
	require.EqualValues(t, 500, ch.AmountCaptured)
}

func TestCapturesNeedAnAPIKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/v1/payments/pay_x/captures", "/v1/payments/pay_x/voids"} {
		r := b.do(http.MethodPost, path, []byte(`{}`), map[string]string{"Idempotency-Key": "k", "Content-Type": "application/json"})
		require.NoError(t, r.CheckProblem(http.StatusUnauthorized, "unauthorized"), path)
	}
	for _, path := range []string{"/v1/captures/cap_x", "/v1/voids/void_x"} {
		require.NoError(t, b.do(http.MethodGet, path, nil, nil).CheckProblem(http.StatusUnauthorized, "unauthorized"), path)
	}
}
