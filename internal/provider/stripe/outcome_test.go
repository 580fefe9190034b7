package stripe_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdk "github.com/stripe/stripe-go/v82"

	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/provider/stripe"
	"github.com/acme/paymentsvc/internal/testkit"
)

// seen is one request the fake Stripe got.
type seen struct {
	method, path, key, version string
	form                       url.Values
}

// answer is one scripted answer: status, extra headers, JSON body.
type answer struct {
	status int
	header map[string]string
	body   any
}

// fakeStripe answers each request with the next scripted answer for its
// path (the last one repeats) and records what it got.
type fakeStripe struct {
	mu     sync.Mutex
	script map[string][]answer // "POST /v1/payment_intents" → answers
	got    []seen
	srvURL string
}

func newFake(t *testing.T, script map[string][]answer) *fakeStripe {
	t.Helper()
	f := &fakeStripe{script: script}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.NoError(t, r.ParseForm())
		f.mu.Lock()
		f.got = append(f.got, seen{method: r.Method, path: r.URL.Path, key: r.Header.Get("Idempotency-Key"), version: r.Header.Get("Stripe-Version"), form: r.Form})
		k := r.Method + " " + r.URL.Path
		as := f.script[k]
		if len(as) == 0 {
			f.mu.Unlock()
			http.Error(w, `{"error":{"type":"invalid_request_error","code":"resource_missing"}}`, 404)
			return
		}
		a := as[0]
		if len(as) > 1 {
			f.script[k] = as[1:]
		}
		f.mu.Unlock()
		for h, v := range a.header {
			w.Header().Set(h, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_ = json.NewEncoder(w).Encode(a.body)
	}))
	t.Cleanup(srv.Close)
	f.srvURL = srv.URL
	return f
}

func (f *fakeStripe) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.got...)
}

func resilient(url string) *provider.Resilient {
	return provider.NewResilient(stripe.New("stripe", url, "sk_test_x", &http.Client{}), provider.Config{
		CallTimeout: 2 * time.Second, RetryBudget: 2 * time.Second, BreakerFailures: 100, BreakerCooldown: time.Second,
	}, nil)
}

func pi(status string, extra map[string]any) map[string]any {
	m := map[string]any{"id": "pi_1", "object": "payment_intent", "amount": 1000, "amount_received": 0, "currency": "eur",
		"status": status, "metadata": map[string]string{"psvc_payment": "pay_1"}, "created": 1700000000}
	if status == "succeeded" {
		m["amount_received"] = 1000
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func stripeErr(typ, code, decline string, payment map[string]any) map[string]any {
	e := map[string]any{"type": typ, "code": code, "message": "x"}
	if decline != "" {
		e["decline_code"] = decline
	}
	if payment != nil {
		e["payment_intent"] = payment
	}
	return map[string]any{"error": e}
}

var chargeReq = provider.ChargeRequest{Amount: 1000, Currency: "EUR", PaymentMethod: "pm_card_visa", Reference: "pay_1", IdempotencyKey: "psvc_pay_1"}

const createPath = "POST /v1/payment_intents"

func TestChargeSucceededSendsStripesParameters(t *testing.T) {
	t.Parallel()
	f := newFake(t, map[string][]answer{createPath: {{status: 200, body: pi("succeeded", nil)}}})
	res := resilient(f.srvURL).CreateCharge(t.Context(), chargeReq)
	require.Equal(t, provider.Succeeded, res.Outcome, "%v", res.Err)
	require.Equal(t, 1, res.Tries)
	require.Equal(t, "pi_1", res.Charge.ID)
	require.Equal(t, int64(1000), res.Charge.CapturedAmount())
	got := f.requests()
	require.Len(t, got, 1)
	require.Equal(t, "psvc_pay_1", got[0].key)
	require.Equal(t, sdk.APIVersion, got[0].version)
	for k, v := range map[string]string{
		"amount": "1000", "currency": "eur", "payment_method": "pm_card_visa", "confirm": "true", "off_session": "true",
		"payment_method_types[0]": "card", "capture_method": "automatic", "metadata[psvc_payment]": "pay_1", "expand[0]": "latest_charge",
	} {
		require.Equal(t, v, got[0].form.Get(k), k)
	}
}

func TestManualChargeIsAuthorizedWithCaptureBefore(t *testing.T) {
	t.Parallel()
	f := newFake(t, map[string][]answer{createPath: {{status: 200, body: pi("requires_capture", map[string]any{
		"amount_capturable": 1000,
		"latest_charge":     map[string]any{"id": "ch_1", "payment_method_details": map[string]any{"card": map[string]any{"capture_before": 1700600000}}},
	})}}})
	req := chargeReq
	req.Manual = true
	res := resilient(f.srvURL).CreateCharge(t.Context(), req)
	require.Equal(t, provider.Succeeded, res.Outcome, "%v", res.Err)
	require.Equal(t, provider.ChargeAuthorized, res.Charge.Status)
	require.Equal(t, int64(1700600000), res.Charge.CaptureBefore)
	require.Equal(t, "manual", f.requests()[0].form.Get("capture_method"))
}

func TestChargeOutcomes(t *testing.T) {
	t.Parallel()
	succeeded := answer{status: 200, body: pi("succeeded", nil)}
	emptyList := answer{status: 200, body: map[string]any{"object": "list", "has_more": false, "data": []any{pi("succeeded", map[string]any{"id": "pi_0", "metadata": map[string]string{}})}}}
	tests := []struct {
		name    string
		script  map[string][]answer
		outcome provider.Outcome
		code    string // decline code, or anomaly for Unknown
		tries   int
	}{
		{"card error uses decline_code", map[string][]answer{createPath: {{status: 402, body: stripeErr("card_error", "card_declined", "insufficient_funds", pi("requires_payment_method", nil))}}},
			provider.Declined, "insufficient_funds", 1},
		{"card error without decline_code uses code", map[string][]answer{createPath: {{status: 402, body: stripeErr("card_error", "expired_card", "", nil)}}},
			provider.Declined, "expired_card", 1},
		{"requires_payment_method after confirming", map[string][]answer{createPath: {{status: 200, body: pi("requires_payment_method", map[string]any{
			"last_payment_error": map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "do_not_honor"}})}}},
			provider.Declined, "do_not_honor", 1},
		{"saved 500 is retried under the same key", map[string][]answer{createPath: {{status: 500, body: stripeErr("api_error", "", "", nil)}, succeeded}},
			provider.Succeeded, "", 2},
		{"409 in flight and 429 are retried", map[string][]answer{createPath: {
			{status: 409, body: stripeErr("idempotency_error", "idempotency_key_in_use", "", nil)},
			{status: 429, body: stripeErr("invalid_request_error", "rate_limit", "", nil)}, succeeded}},
			provider.Succeeded, "", 3},
		{"processing is read again", map[string][]answer{createPath: {{status: 200, body: pi("processing", nil)}, succeeded}},
			provider.Succeeded, "", 2},
		{"idempotency_error is unknown with its anomaly", map[string][]answer{createPath: {{status: 400, body: stripeErr("idempotency_error", "", "", nil)}}},
			provider.Unknown, "idempotency_error", 1},
		{"unexpected_state on a succeeded PaymentIntent is succeeded", map[string][]answer{
			createPath:                     {{status: 400, body: stripeErr("invalid_request_error", "payment_intent_unexpected_state", "", pi("succeeded", nil))}},
			"GET /v1/payment_intents/pi_1": {succeeded}},
			provider.Succeeded, "", 1},
		{"other 400 whose read-back fails is unknown", map[string][]answer{createPath: {{status: 400, body: stripeErr("invalid_request_error", "parameter_invalid_integer", "", nil)}}},
			provider.Unknown, "", 1},
		{"400 with nothing of ours read back is a rejection with its code", map[string][]answer{
			createPath:                {{status: 400, body: stripeErr("invalid_request_error", "resource_missing", "", nil)}},
			"GET /v1/payment_intents": {emptyList}},
			provider.Declined, "resource_missing", 1},
		{"404 without a code is a rejection: invalid_request", map[string][]answer{
			createPath:                {{status: 404, body: stripeErr("invalid_request_error", "", "", nil)}},
			"GET /v1/payment_intents": {emptyList}},
			provider.Declined, "invalid_request", 1},
		{"400 after an ambiguous try is unknown", map[string][]answer{
			createPath:                {{status: 500, body: stripeErr("api_error", "", "", nil)}, {status: 400, body: stripeErr("invalid_request_error", "resource_missing", "", nil)}},
			"GET /v1/payment_intents": {emptyList}},
			provider.Unknown, "", 2},
		{"400 while our PaymentIntent reads back succeeded is succeeded", map[string][]answer{
			createPath:                     {{status: 400, body: stripeErr("invalid_request_error", "resource_missing", "", nil)}},
			"GET /v1/payment_intents":      {{status: 200, body: map[string]any{"object": "list", "has_more": false, "data": []any{pi("succeeded", nil)}}}},
			"GET /v1/payment_intents/pi_1": {succeeded}},
			provider.Succeeded, "", 1},
		{"Stripe-Should-Retry false stops a 500", map[string][]answer{createPath: {{status: 500, header: map[string]string{"Stripe-Should-Retry": "false"}, body: stripeErr("api_error", "", "", nil)}}},
			provider.Unknown, "", 1},
		{"Stripe-Should-Retry true retries a 400", map[string][]answer{createPath: {{status: 400, header: map[string]string{"Stripe-Should-Retry": "true"}, body: stripeErr("invalid_request_error", "lock_timeout", "", nil)}, succeeded}},
			provider.Succeeded, "", 2},
		{"requires_action is canceled and declined", map[string][]answer{
			createPath:                             {{status: 200, body: pi("requires_action", nil)}},
			"POST /v1/payment_intents/pi_1/cancel": {{status: 200, body: pi("canceled", map[string]any{"cancellation_reason": "abandoned"})}}},
			provider.Declined, "authentication_required", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.script)
			res := resilient(f.srvURL).CreateCharge(t.Context(), chargeReq)
			require.Equal(t, tt.outcome, res.Outcome, "%v", res.Err)
			require.Equal(t, tt.tries, res.Tries)
			switch tt.outcome {
			case provider.Declined:
				require.Equal(t, tt.code, res.DeclineCode)
				require.Equal(t, provider.ChargeFailed, res.Charge.Status)
				rejected := tt.code == "resource_missing" || tt.code == "invalid_request"
				require.Equal(t, rejected, res.Rejected, "only a refused request is a rejection")
				if rejected {
					require.Empty(t, res.Charge.ID)
				}
			case provider.Unknown:
				require.Equal(t, tt.code, res.Anomaly)
			}
			creates := 0
			for _, r := range f.requests() {
				if r.method == http.MethodPost && r.path == "/v1/payment_intents" {
					creates++
					require.Equal(t, "psvc_pay_1", r.key, "every try carries our key")
				}
				if r.path == "/v1/payment_intents/pi_1/cancel" {
					require.Equal(t, "psvc_pay_1_cancel", r.key)
					require.Equal(t, "abandoned", r.form.Get("cancellation_reason"))
				}
			}
			require.Equal(t, tt.tries, creates)
		})
	}
}

func TestChargeNotSentWhenConnectionRefused(t *testing.T) {
	t.Parallel()
	res := resilient(testkit.RefusedURL(t, "http")).CreateCharge(t.Context(), chargeReq)
	require.Equal(t, provider.NotSent, res.Outcome, "%v", res.Err)
}

func TestChargeLostAnswerIsUnknown(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	res := resilient(srv.URL).CreateCharge(t.Context(), chargeReq)
	require.Equal(t, provider.Unknown, res.Outcome)
	require.Greater(t, res.Tries, 1)
}

func TestFindChargeListsAndMatchesMetadata(t *testing.T) {
	t.Parallel()
	other := pi("succeeded", map[string]any{"id": "pi_0", "metadata": map[string]string{}})
	f := newFake(t, map[string][]answer{"GET /v1/payment_intents": {
		{status: 200, body: map[string]any{"object": "list", "has_more": true, "data": []any{other}}},
		{status: 200, body: map[string]any{"object": "list", "has_more": false, "data": []any{pi("succeeded", nil)}}},
	}})
	since := time.Unix(1700000000, 0)
	ch, err := resilient(f.srvURL).FindCharge(t.Context(), provider.Lookup{Key: "psvc_pay_1", Reference: "pay_1", Since: since})
	require.NoError(t, err)
	require.Equal(t, "pi_1", ch.ID)
	got := f.requests()
	require.Len(t, got, 2)
	require.Equal(t, "1699999700", got[0].form.Get("created[gte]"))
	require.Equal(t, "pi_0", got[1].form.Get("starting_after"))

	f = newFake(t, map[string][]answer{"GET /v1/payment_intents": {{status: 200, body: map[string]any{"object": "list", "has_more": false, "data": []any{other}}}}})
	_, err = resilient(f.srvURL).FindCharge(t.Context(), provider.Lookup{Key: "psvc_pay_1", Reference: "pay_1", Since: since})
	require.ErrorIs(t, err, provider.ErrNotFound)
}

func TestListMarksForeignPaymentIntents(t *testing.T) {
	t.Parallel()
	f := newFake(t, map[string][]answer{"GET /v1/payment_intents": {{status: 200, body: map[string]any{"object": "list", "has_more": false,
		"data": []any{pi("succeeded", nil), pi("succeeded", map[string]any{"id": "pi_x", "metadata": map[string]string{}})}}}}})
	page, err := resilient(f.srvURL).ListCharges(t.Context(), provider.ListQuery{From: time.Unix(1700000000, 0), To: time.Unix(1700086400, 0), Limit: 50})
	require.NoError(t, err)
	require.Len(t, page.Data, 2)
	require.False(t, page.Data[0].Foreign)
	require.True(t, page.Data[1].Foreign)
	require.Equal(t, "50", f.requests()[0].form.Get("limit"))
	require.Equal(t, "1700086400", f.requests()[0].form.Get("created[lt]"))
}

func TestRefundBadRequestIsDecidedByReadingRefundsBack(t *testing.T) {
	t.Parallel()
	const refundPath = "POST /v1/refunds"
	ours := map[string]any{"id": "re_1", "object": "refund", "amount": 400, "status": "succeeded", "payment_intent": "pi_1",
		"metadata": map[string]string{"psvc_refund": "rf_1"}}
	other := map[string]any{"id": "re_0", "object": "refund", "amount": 100, "status": "succeeded", "payment_intent": "pi_1",
		"metadata": map[string]string{"psvc_refund": "rf_0"}}
	list := func(data ...any) answer {
		return answer{status: 200, body: map[string]any{"object": "list", "has_more": false, "data": data}}
	}
	tests := []struct {
		name     string
		script   map[string][]answer
		outcome  provider.Outcome
		code     string
		rejected bool
		tries    int
	}{
		{"amount_too_large with no refund of ours is declined", map[string][]answer{
			refundPath: {{status: 400, body: stripeErr("invalid_request_error", "amount_too_large", "", nil)}}, "GET /v1/refunds": {list(other)}},
			provider.Declined, "amount_too_large", false, 1},
		{"another 400 with no refund of ours is a rejection", map[string][]answer{
			refundPath: {{status: 400, body: stripeErr("invalid_request_error", "parameter_invalid_integer", "", nil)}}, "GET /v1/refunds": {list()}},
			provider.Declined, "parameter_invalid_integer", true, 1},
		{"a 400 while our refund reads back is succeeded", map[string][]answer{
			refundPath: {{status: 400, body: stripeErr("invalid_request_error", "charge_already_refunded", "", nil)}}, "GET /v1/refunds": {list(other, ours)}},
			provider.Succeeded, "", false, 1},
		{"a rejection after an ambiguous try is unknown", map[string][]answer{
			refundPath:        {{status: 503, body: stripeErr("api_error", "", "", nil)}, {status: 400, body: stripeErr("invalid_request_error", "parameter_invalid_integer", "", nil)}},
			"GET /v1/refunds": {list()}},
			provider.Unknown, "", false, 2},
		{"a 400 whose read-back fails is unknown", map[string][]answer{
			refundPath: {{status: 400, body: stripeErr("invalid_request_error", "amount_too_large", "", nil)}}, "GET /v1/refunds": {{status: 500, body: stripeErr("api_error", "", "", nil)}}},
			provider.Unknown, "", false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.script)
			res := resilient(f.srvURL).CreateRefund(t.Context(), provider.RefundRequest{ChargeID: "pi_1", Amount: 400, Reference: "rf_1", IdempotencyKey: "psvc_rf_1"})
			require.Equal(t, tt.outcome, res.Outcome, "%v", res.Err)
			require.Equal(t, tt.tries, res.Tries)
			require.Equal(t, tt.code, res.DeclineCode)
			require.Equal(t, tt.rejected, res.Rejected)
			if tt.outcome == provider.Succeeded {
				require.Equal(t, "re_1", res.Refund.ID)
			}
			posts := 0
			for _, r := range f.requests() {
				if r.method == http.MethodPost {
					posts++
					require.Equal(t, "psvc_rf_1", r.key)
				}
				if r.method == http.MethodGet {
					require.Equal(t, "pi_1", r.form.Get("payment_intent"))
				}
			}
			require.Equal(t, tt.tries, posts)
		})
	}
}
