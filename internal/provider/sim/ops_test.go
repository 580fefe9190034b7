package sim

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/provider"
)

func TestChargeByKeyFound(t *testing.T) {
	t.Parallel()
	want := provider.Charge{ID: "ch_1", Amount: 500, Currency: "USD", Status: provider.ChargeSucceeded, Reference: "pay_1", IdempotencyKey: "k 1/+", Created: 1700000000}
	r, _ := setup(t, testConfig(), func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/charges" || r.URL.Query().Get("idempotency_key") != want.IdempotencyKey {
			answerError(w, http.StatusBadRequest, "invalid_request")
			return
		}
		answerJSON(w, http.StatusOK, want)
	})

	got, err := r.FindCharge(t.Context(), provider.Lookup{Key: want.IdempotencyKey})

	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestChargeByKeyNotFoundIsNotABreakerFailure(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.BreakerFailures = 1
	r, f := setup(t, cfg, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerError(w, http.StatusNotFound, "resource_missing")
	})

	for range 3 {
		_, err := r.FindCharge(t.Context(), provider.Lookup{Key: "k1"})
		require.ErrorIs(t, err, provider.ErrNotFound)
	}

	require.Equal(t, 3, f.Hits())
	require.False(t, r.BreakerOpen())
	require.Zero(t, r.ConsecutiveFailures())
}

func TestChargeByKeyBare404IsNotNotFound(t *testing.T) {
	t.Parallel()
	r, f := setup(t, testConfig(), func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.NotFound(w, nil)
	})

	_, err := r.FindCharge(t.Context(), provider.Lookup{Key: "k1"})

	// A 404 without the provider's code (wrong URL, a proxy) proves nothing.
	require.Error(t, err)
	require.NotErrorIs(t, err, provider.ErrNotFound)
	var ce *provider.CallError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusNotFound, ce.Status)
	require.Equal(t, 1, f.Hits())
}

func TestChargeByKeyEmptyKeyIsRefused(t *testing.T) {
	t.Parallel()
	r, f := setup(t, testConfig(), func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerError(w, http.StatusNotFound, "resource_missing")
	})

	_, err := r.FindCharge(t.Context(), provider.Lookup{Key: ""})

	require.Error(t, err)
	require.NotErrorIs(t, err, provider.ErrNotFound)
	require.Equal(t, 0, f.Hits())
}

func TestListCharges(t *testing.T) {
	t.Parallel()
	data := []provider.Charge{
		{ID: "ch_1", Amount: 500, Currency: "USD", Status: provider.ChargeSucceeded, Reference: "pay_1", IdempotencyKey: "k1", Created: 1700000001},
		{ID: "ch_2", Amount: 700, Currency: "EUR", Status: provider.ChargeFailed, Reference: "pay_2", IdempotencyKey: "k2", Created: 1700000002, FailureCode: "card_declined", Refunded: false},
	}
	var gte, lt, limit, after string
	r, _ := setup(t, testConfig(), func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			answerError(w, http.StatusServiceUnavailable, "")
			return
		}
		gte, lt = r.URL.Query().Get("created_gte"), r.URL.Query().Get("created_lt")
		limit, after = r.URL.Query().Get("limit"), r.URL.Query().Get("starting_after")
		answerJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": true})
	})

	got, err := r.ListCharges(t.Context(), provider.ListQuery{From: time.Unix(1700000000, 0), To: time.Unix(1700086400, 500), After: "ch_0", Limit: 2})

	require.NoError(t, err)
	require.Equal(t, provider.ChargePage{Data: data, HasMore: true}, got)
	require.Equal(t, "1700000000", gte)
	// [from, to) in whole seconds: a charge created at 1700086400 is before to.
	require.Equal(t, "1700086401", lt)
	require.Equal(t, "2", limit)
	require.Equal(t, "ch_0", after)
}

func TestListChargesEmpty(t *testing.T) {
	t.Parallel()
	r, _ := setup(t, testConfig(), func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerJSON(w, http.StatusOK, map[string]any{"data": []provider.Charge{}})
	})

	got, err := r.ListCharges(t.Context(), provider.ListQuery{From: time.Unix(0, 0), To: time.Unix(86400, 0)})

	require.NoError(t, err)
	require.Empty(t, got.Data)
	require.False(t, got.HasMore)
}

func TestRefund(t *testing.T) {
	t.Parallel()
	var key, body string
	r, f := setup(t, testConfig(), func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/refunds" {
			answerError(w, http.StatusNotFound, "no_route")
			return
		}
		b, _ := io.ReadAll(r.Body)
		key, body = r.Header.Get("Idempotency-Key"), string(b)
		answerJSON(w, http.StatusCreated, provider.Refund{ID: "re_1", Charge: "ch_1", Amount: 200, Status: "succeeded", Reference: "rfd_1", IdempotencyKey: "refund-k1"})
	})

	got := r.CreateRefund(t.Context(), provider.RefundRequest{ChargeID: "ch_1", Amount: 200, Reference: "rfd_1", IdempotencyKey: "refund-k1"})

	require.Equal(t, provider.Succeeded, got.Outcome)
	require.Equal(t, &provider.Refund{ID: "re_1", Charge: "ch_1", Amount: 200, Status: "succeeded", Reference: "rfd_1", IdempotencyKey: "refund-k1"}, got.Refund)
	require.Equal(t, "refund-k1", key)
	require.JSONEq(t, `{"charge":"ch_1","amount":200,"reference":"rfd_1"}`, body)
	require.Equal(t, 1, f.Hits())
}

// TestRefundRefusals: a refusal that proves nothing was refunded is Declined
// with its code, never retried and never held against the provider; any
// other 4xx is Unknown (it proves nothing).
func TestRefundRefusals(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]provider.Outcome{
		"amount_too_large": provider.Declined, "charge_not_refundable": provider.Declined, "charge_already_refunded": provider.Declined,
		"idempotency_error": provider.Unknown,
	} {
		r, f := setup(t, testConfig(), func(_ int, w http.ResponseWriter, _ *http.Request) {
			answerError(w, http.StatusBadRequest, code)
		})

		got := r.CreateRefund(t.Context(), provider.RefundRequest{ChargeID: "ch_1", Amount: 5, IdempotencyKey: "refund-k1"})

		require.Equal(t, want, got.Outcome, code)
		if want == provider.Declined {
			require.Equal(t, code, got.DeclineCode)
		}
		require.Equal(t, 1, f.Hits(), code)
		require.False(t, r.BreakerOpen(), code)
	}
}

func TestRefundByKey(t *testing.T) {
	t.Parallel()
	r, _ := setup(t, testConfig(), func(_ int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("idempotency_key") {
		case "rk1":
			answerJSON(w, http.StatusOK, provider.Refund{ID: "re_1", Charge: "ch_1", Amount: 200, Status: "succeeded", IdempotencyKey: "rk1"})
		default:
			answerError(w, http.StatusNotFound, "resource_missing")
		}
	})

	got, err := r.FindRefund(t.Context(), provider.Lookup{Key: "rk1"})
	require.NoError(t, err)
	require.Equal(t, "re_1", got.ID)
	_, err = r.FindRefund(t.Context(), provider.Lookup{Key: "rk2"})
	require.ErrorIs(t, err, provider.ErrNotFound)
}
