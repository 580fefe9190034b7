package providersim

import (
	"net/http"
	"regexp"
	"testing"
	"time"
)

var chargeIDPattern = regexp.MustCompile(`^ch_[0-9a-f]{24}$`)

func TestAPIKeyRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})

	for _, tc := range []struct {
		name, method, path, auth string
	}{
		{"charge without header", http.MethodPost, "/v1/charges", ""},
		{"charge with wrong key", http.MethodPost, "/v1/charges", "Bearer sk_wrong"},
		{"charge with wrong scheme", http.MethodPost, "/v1/charges", "Basic " + testAPIKey},
		{"lookup without header", http.MethodGet, "/v1/charges?idempotency_key=k", ""},
		{"refund without header", http.MethodPost, "/v1/refunds", ""},
		{"refund with wrong key", http.MethodPost, "/v1/refunds", "Bearer sk_wrong"},
		{"refund lookup without header", http.MethodGet, "/v1/refunds?idempotency_key=k", ""},
		{"refund by id without header", http.MethodGet, "/v1/refunds/re_x", ""},
	} {
		req := b.request(tc.method, tc.path, "k-auth", chargeBody(500, "pm_card_visa"), false)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		r := send(t, b.client, req)
		equal(t, r.status, http.StatusUnauthorized, tc.name+" status")
		equal(t, errorCode(t, r), "unauthorized", tc.name+" code")
	}
	equal(t, b.stats(), Stats{}, "stats after unauthorized calls")
}

func TestCreateCharge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	before := time.Now().Unix()

	r := b.charge("k-create", 500, "pm_card_visa")

	equal(t, r.status, http.StatusCreated, "status")
	equal(t, r.header.Get("Idempotent-Replayed"), "", "replay header")
	ch := decode[Charge](t, r)
	if !chargeIDPattern.MatchString(ch.ID) {
		t.Fatalf("charge id %q does not match %v", ch.ID, chargeIDPattern)
	}
	equal(t, ch.Amount, 500, "amount")
	equal(t, ch.Currency, "USD", "currency")
	equal(t, ch.Status, StatusSucceeded, "status field")
	equal(t, ch.Reference, "pay_test", "reference")
	equal(t, ch.IdempotencyKey, "k-create", "idempotency_key")
	equal(t, ch.PaymentMethod, "pm_card_visa", "payment_method")
	equal(t, ch.Refunded, false, "refunded")
	equal(t, ch.FailureCode, "", "failure_code")
	if ch.Created < before || ch.Created > time.Now().Unix() {
		t.Fatalf("created %d is not now", ch.Created)
	}
	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1}, "stats")
}

func TestChargeReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	first := b.charge("k-replay", 500, "pm_card_visa")
	equal(t, first.status, http.StatusCreated, "first status")

	// Same parameters in another key order and spacing: still the same request.
	again := b.do(http.MethodPost, "/v1/charges", "k-replay",
		`{"reference":"pay_test", "payment_method":"pm_card_visa","currency":"USD","amount":500}`)

	equal(t, again.status, http.StatusCreated, "replay status")
	equal(t, again.header.Get("Idempotent-Replayed"), "true", "replay header")
	equal(t, string(again.body), string(first.body), "replay body")
	equal(t, decode[Charge](t, again).ID, decode[Charge](t, first).ID, "replay id")
	equal(t, b.stats(), Stats{ChargeCalls: 2, Charges: 1}, "stats")
}

func TestChargeKeyReusedWithOtherParameters(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	equal(t, b.charge("k-reuse", 500, "pm_card_visa").status, http.StatusCreated, "first status")

	r := b.charge("k-reuse", 700, "pm_card_visa")

	equal(t, r.status, http.StatusBadRequest, "status")
	equal(t, errorCode(t, r), "idempotency_error", "code")
	equal(t, b.stats().Charges, 1, "charges")
}

func TestChargeDeclined(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})

	r := b.charge("k-declined", 500, "pm_card_declined")

	equal(t, r.status, http.StatusPaymentRequired, "status")
	body := decode[struct {
		Error  errorBody
		Charge Charge
	}](t, r)
	equal(t, body.Error.Code, "card_declined", "error code")
	equal(t, body.Charge.Status, StatusFailed, "charge status")
	equal(t, body.Charge.FailureCode, "card_declined", "failure_code")
	if !chargeIDPattern.MatchString(body.Charge.ID) {
		t.Fatalf("charge id %q", body.Charge.ID)
	}

	again := b.charge("k-declined", 500, "pm_card_declined")
	equal(t, again.status, http.StatusPaymentRequired, "replay status")
	equal(t, again.header.Get("Idempotent-Replayed"), "true", "replay header")
	equal(t, string(again.body), string(r.body), "replay body")
	equal(t, b.stats(), Stats{ChargeCalls: 2, Charges: 1}, "stats")
}

func TestChargeInvalidRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})

	missingKey := b.do(http.MethodPost, "/v1/charges", "", chargeBody(500, "pm_card_visa"))
	equal(t, missingKey.status, http.StatusBadRequest, "missing key status")
	equal(t, errorCode(t, missingKey), "idempotency_key_missing", "missing key code")

	for name, body := range map[string]any{
		"bad json":         `{"amount":`,
		"trailing data":    `{"amount":500,"currency":"USD"} {}`,
		"zero amount":      chargeBody(0, "pm_card_visa"),
		"negative amount":  chargeBody(-5, "pm_card_visa"),
		"fraction amount":  `{"amount":5.5,"currency":"USD"}`,
		"missing currency": `{"amount":500,"payment_method":"pm_card_visa"}`,
	} {
		r := b.do(http.MethodPost, "/v1/charges", "k-invalid", body)
		equal(t, r.status, http.StatusBadRequest, name+" status")
		equal(t, errorCode(t, r), "invalid_request", name+" code")
	}
	equal(t, b.stats().Charges, 0, "charges")
}

func TestConcurrentCallsWithOneKeyMakeOneCharge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Latency: 50 * time.Millisecond})
	const callers = 20

	replies := b.sendTogether(callers, func(int) *http.Request {
		return b.request(http.MethodPost, "/v1/charges", "k-concurrent", chargeBody(500, "pm_card_visa"), true)
	})

	ids := map[string]int{}
	created := 0
	for _, r := range replies {
		equal(t, r.status, http.StatusCreated, "caller status")
		ids[decode[Charge](t, r).ID]++
		if r.header.Get("Idempotent-Replayed") != "true" {
			created++
		}
	}
	equal(t, len(ids), 1, "distinct charge ids")
	equal(t, created, 1, "answers that created the charge")
	equal(t, b.stats(), Stats{ChargeCalls: callers, Charges: 1}, "stats")
	equal(t, len(b.charges()), 1, "charges listed")
}
