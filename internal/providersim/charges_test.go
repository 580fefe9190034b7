package providersim

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testkit"
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
	} {
		req := b.request(tc.method, tc.path, "k-auth", chargeBody(500, "pm_card_visa"), false)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		r := send(t, b.client, req)
		require.Equal(t, http.StatusUnauthorized, r.status, tc.name+" status")
		require.Equal(t, "unauthorized", errorCode(t, r), tc.name+" code")
	}
	require.Equal(t, Stats{}, b.stats(), "stats after unauthorized calls")
}

func TestCreateCharge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	before := time.Now().Unix()

	r := b.charge("k-create", 500, "pm_card_visa")
	require.Equal(t, http.StatusCreated, r.status, "status")
	require.Equal(t, "", r.header.Get("Idempotent-Replayed"), "replay header")
	ch := decode[Charge](t, r)
	require.Regexp(t, chargeIDPattern, ch.ID)
	require.EqualValues(t, 500, ch.Amount, "amount")
	require.Equal(t, "USD", ch.Currency, "currency")
	require.Equal(t, StatusSucceeded, ch.Status, "status field")
	require.Equal(t, "pay_test", ch.Reference, "reference")
	require.Equal(t, "k-create", ch.IdempotencyKey, "idempotency_key")
	require.Equal(t, "pm_card_visa", ch.PaymentMethod, "payment_method")
	require.Equal(t, false, ch.Refunded, "refunded")
	require.Equal(t, "", ch.FailureCode, "failure_code")
	require.True(t, ch.Created >= before && ch.Created <= time.Now().Unix(), "created %d is not now", ch.Created)
	require.Equal(t, Stats{ChargeCalls: 1, Charges: 1}, b.stats(), "stats")
}

func TestChargeReplay(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	first := b.charge("k-replay", 500, "pm_card_visa")
	require.Equal(t, http.StatusCreated, first.status, "first status")

	// Same parameters in another key order and spacing: still the same request.
	again := b.do(http.MethodPost, "/v1/charges", "k-replay",
		`{"reference":"pay_test", "payment_method":"pm_card_visa","currency":"USD","amount":500}`)
	require.Equal(t, http.StatusCreated, again.status, "replay status")
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"), "replay header")
	require.Equal(t, string(first.body), string(again.body), "replay body")
	require.Equal(t, decode[Charge](t, first).ID, decode[Charge](t, again).ID, "replay id")
	require.Equal(t, Stats{ChargeCalls: 2, Charges: 1}, b.stats(), "stats")
}

func TestChargeKeyReusedWithOtherParameters(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	require.Equal(t, http.StatusCreated, b.charge("k-reuse", 500, "pm_card_visa").status, "first status")

	r := b.charge("k-reuse", 700, "pm_card_visa")
	require.Equal(t, http.StatusBadRequest, r.status, "status")
	require.Equal(t, "idempotency_error", errorCode(t, r), "code")
	require.EqualValues(t, 1, b.stats().Charges, "charges")
}

func TestChargeDeclined(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})

	r := b.charge("k-declined", 500, "pm_card_declined")
	require.Equal(t, http.StatusPaymentRequired, r.status, "status")
	body := decode[struct {
		Error  errorBody
		Charge Charge
	}](t, r)
	require.Equal(t, "card_declined", body.Error.Code, "error code")
	require.Equal(t, StatusFailed, body.Charge.Status, "charge status")
	require.Equal(t, "card_declined", body.Charge.FailureCode, "failure_code")
	require.Regexp(t, chargeIDPattern, body.Charge.ID)

	again := b.charge("k-declined", 500, "pm_card_declined")
	require.Equal(t, http.StatusPaymentRequired, again.status, "replay status")
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"), "replay header")
	require.Equal(t, string(r.body), string(again.body), "replay body")
	require.Equal(t, Stats{ChargeCalls: 2, Charges: 1}, b.stats(), "stats")
}

func TestChargeInvalidRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})

	missingKey := b.do(http.MethodPost, "/v1/charges", "", chargeBody(500, "pm_card_visa"))
	require.Equal(t, http.StatusBadRequest, missingKey.status, "missing key status")
	require.Equal(t, "idempotency_key_missing", errorCode(t, missingKey), "missing key code")

	for name, body := range map[string]any{
		"bad json":         `{"amount":`,
		"trailing data":    `{"amount":500,"currency":"USD"} {}`,
		"zero amount":      chargeBody(0, "pm_card_visa"),
		"negative amount":  chargeBody(-5, "pm_card_visa"),
		"fraction amount":  `{"amount":5.5,"currency":"USD"}`,
		"missing currency": `{"amount":500,"payment_method":"pm_card_visa"}`,
	} {
		r := b.do(http.MethodPost, "/v1/charges", "k-invalid", body)
		require.Equal(t, http.StatusBadRequest, r.status, name+" status")
		require.Equal(t, "invalid_request", errorCode(t, r), name+" code")
	}
	require.EqualValues(t, 0, b.stats().Charges, "charges")
}

func TestConcurrentCallsWithOneKeyMakeOneCharge(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Latency: 50 * time.Millisecond})
	const callers = 20

	reqs := make([]*http.Request, callers)
	for i := range reqs {
		reqs[i] = b.request(http.MethodPost, "/v1/charges", "k-concurrent", chargeBody(500, "pm_card_visa"), true)
	}
	replies := make([]reply, callers)
	errs := make([]error, callers)
	testkit.Together(callers, func(i int) { replies[i], errs[i] = read(b.client.Do(reqs[i])) })
	for i, err := range errs {
		require.NoError(t, err, "caller %d", i)
	}

	ids := map[string]int{}
	created := 0
	for _, r := range replies {
		require.Equal(t, http.StatusCreated, r.status, "caller status")
		ids[decode[Charge](t, r).ID]++
		if r.header.Get("Idempotent-Replayed") != "true" {
			created++
		}
	}
	require.EqualValues(t, 1, len(ids), "distinct charge ids")
	require.EqualValues(t, 1, created, "answers that created the charge")
	require.Equal(t, Stats{ChargeCalls: callers, Charges: 1}, b.stats(), "stats")
	require.EqualValues(t, 1, len(b.charges()), "charges listed")
}
