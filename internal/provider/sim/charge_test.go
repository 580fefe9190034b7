package sim

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testkit"

	"github.com/acme/paymentsvc/internal/provider"
)

func TestCreateChargeSucceeded(t *testing.T) {
	t.Parallel()
	var f *fakeProvider
	r, f := setup(t, testConfig(), func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/charges" || r.Header.Get("Content-Type") != "application/json" {
			answerError(w, http.StatusNotFound, "no_route")
			return
		}
		f.answerCharge(w, r)
	})

	res := r.CreateCharge(t.Context(), chargeReq("k1"))

	require.Equal(t, provider.Succeeded, res.Outcome)
	require.NoError(t, res.Err)
	require.Equal(t, 1, res.Tries)
	require.NotNil(t, res.Charge)
	require.Equal(t, "ch_k1", res.Charge.ID)
	require.Equal(t, provider.ChargeSucceeded, res.Charge.Status)
	require.Equal(t, int64(500), res.Charge.Amount)
	require.Empty(t, res.DeclineCode)
	require.Equal(t, []string{"k1"}, f.Keys())
	require.Equal(t, []chargeBody{{Amount: 500, Currency: "USD", PaymentMethod: "pm_card_visa", Reference: "pay_k1"}}, f.Bodies())
}

func TestCreateChargeDeclinedIsNotRetried(t *testing.T) {
	t.Parallel()
	var f *fakeProvider
	r, f := setup(t, testConfig(), func(_ int, w http.ResponseWriter, r *http.Request) { f.answerCharge(w, r) })

	res := r.CreateCharge(t.Context(), declinedReq("k1"))

	require.Equal(t, provider.Declined, res.Outcome)
	require.Equal(t, "card_declined", res.DeclineCode)
	require.Equal(t, 1, res.Tries)
	require.NoError(t, res.Err)
	require.NotNil(t, res.Charge)
	require.Equal(t, "ch_k1", res.Charge.ID)
	require.Equal(t, provider.ChargeFailed, res.Charge.Status)
	require.Equal(t, 1, f.Hits())
}

func TestCreateChargeRetriesWithTheSameKey(t *testing.T) {
	t.Parallel()
	var f *fakeProvider
	r, f := setup(t, testConfig(), func(n int, w http.ResponseWriter, r *http.Request) {
		if n <= 2 {
			answerError(w, http.StatusServiceUnavailable, "simulated_fault")
			return
		}
		f.answerCharge(w, r)
	})

	res := r.CreateCharge(t.Context(), chargeReq("k1"))

	require.Equal(t, provider.Succeeded, res.Outcome)
	require.Equal(t, 3, res.Tries)
	require.Equal(t, "ch_k1", res.Charge.ID)
	require.Equal(t, 3, f.Hits())
	require.Equal(t, []string{"k1", "k1", "k1"}, f.Keys())
}

func TestCreateChargeRetries409And429(t *testing.T) {
	t.Parallel()
	var f *fakeProvider
	r, f := setup(t, testConfig(), func(n int, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			answerError(w, http.StatusConflict, "idempotency_key_in_use")
		case 2:
			answerError(w, http.StatusTooManyRequests, "rate_limited")
		default:
			f.answerCharge(w, r)
		}
	})

	res := r.CreateCharge(t.Context(), chargeReq("k1"))

	require.Equal(t, provider.Succeeded, res.Outcome)
	require.Equal(t, 3, res.Tries)
	require.Equal(t, 3, f.Hits())
}

func TestCreateChargeUnknownWhenBudgetSpent(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RetryBudget, cfg.CallTimeout = 300*time.Millisecond, 500*time.Millisecond
	r, f := setup(t, cfg, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerError(w, http.StatusServiceUnavailable, "simulated_fault")
	})

	start := time.Now()
	res := r.CreateCharge(t.Context(), chargeReq("k1"))
	elapsed := time.Since(start)

	require.Equal(t, provider.Unknown, res.Outcome)
	require.Nil(t, res.Charge)
	require.GreaterOrEqual(t, res.Tries, 2)
	require.Equal(t, res.Tries, f.Hits())
	var ce *provider.CallError
	require.ErrorAs(t, res.Err, &ce)
	require.Equal(t, provider.KindStatus, ce.Kind)
	require.Equal(t, http.StatusServiceUnavailable, ce.Status)
	require.NotErrorIs(t, res.Err, provider.ErrUnavailable)
	// A correctness bound: no call starts after the budget, and a call lasts
	// at most CallTimeout. The slack is for a busy machine; a wrapper that
	// kept retrying would go on far longer (the provider never recovers).
	require.Less(t, elapsed, cfg.RetryBudget+cfg.CallTimeout+2*time.Second)
}

func TestCreateChargeUnknownWhenProviderHangs(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.CallTimeout, cfg.RetryBudget = 100*time.Millisecond, 300*time.Millisecond
	var f *fakeProvider
	r, f := setup(t, cfg, func(_ int, _ http.ResponseWriter, r *http.Request) { f.hang(r) })

	start := time.Now()
	res := r.CreateCharge(t.Context(), chargeReq("k1"))
	elapsed := time.Since(start)

	require.Equal(t, provider.Unknown, res.Outcome)
	require.GreaterOrEqual(t, res.Tries, 1)
	var ce *provider.CallError
	require.ErrorAs(t, res.Err, &ce)
	require.Equal(t, provider.KindTimeout, ce.Kind)
	require.True(t, ce.Sent)
	require.Less(t, elapsed, cfg.RetryBudget+cfg.CallTimeout+2*time.Second, "the hanging calls were cut off (slack for a busy machine)")
}

func TestCreateChargeUnknownOnNonRetryable4xx(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		apiKey string
		status int
		code   string
	}{
		{name: "idempotency error", apiKey: testAPIKey, status: http.StatusBadRequest, code: "idempotency_error"},
		{name: "unauthorized", apiKey: "sk_wrong", status: http.StatusUnauthorized, code: "unauthorized"},
		{name: "402 without a charge", apiKey: testAPIKey, status: http.StatusPaymentRequired, code: "card_declined"},
		{name: "404", apiKey: testAPIKey, status: http.StatusNotFound, code: "resource_missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request) { answerError(w, tt.status, tt.code) })
			r := provider.NewResilient(NewHTTPClient("sim", f.url, tt.apiKey, nil), testConfig(), nil)

			res := r.CreateCharge(t.Context(), chargeReq("k1"))

			require.Equal(t, provider.Unknown, res.Outcome)
			require.Equal(t, 1, res.Tries)
			require.Equal(t, 1, f.Hits())
			var ce *provider.CallError
			require.ErrorAs(t, res.Err, &ce)
			require.Equal(t, provider.KindStatus, ce.Kind)
			require.Equal(t, tt.status, ce.Status)
			require.Equal(t, tt.code, ce.Code)
			require.NotErrorIs(t, res.Err, provider.ErrNotFound)
			require.False(t, r.BreakerOpen())
			require.Zero(t, r.ConsecutiveFailures())
		})
	}
}

func TestCreateChargeRetriesLostResponse(t *testing.T) {
	t.Parallel()
	var f *fakeProvider
	r, f := setup(t, testConfig(), func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			// drop_after_commit: the charge exists, the answer is lost.
			f.answerCharge(httptest.NewRecorder(), r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		f.answerCharge(w, r)
	})

	res := r.CreateCharge(t.Context(), chargeReq("k1"))

	require.Equal(t, provider.Succeeded, res.Outcome)
	require.Equal(t, 2, res.Tries)
	require.Equal(t, "ch_k1", res.Charge.ID)
	require.Equal(t, []string{"k1", "k1"}, f.Keys())
}

func TestCreateChargeNotSentWhenConnectionRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RetryBudget = 300 * time.Millisecond
	r := provider.NewResilient(NewHTTPClient("sim", testkit.RefusedURL(t, "http"), testAPIKey, nil), cfg, nil)

	res := r.CreateCharge(t.Context(), chargeReq("k1"))

	// No connection was obtained: provably not sent, and the run ends at
	// once so that the payment can go to another provider.
	require.Equal(t, provider.NotSent, res.Outcome)
	require.Equal(t, 1, res.Tries)
	var ce *provider.CallError
	require.ErrorAs(t, res.Err, &ce)
	require.Equal(t, provider.KindTransport, ce.Kind)
	require.False(t, ce.Sent)
}

func TestCreateChargeStopsWhenCtxCanceledBetweenRetries(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RetryBudget = time.Minute
	f := newFake(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerError(w, http.StatusServiceUnavailable, "simulated_fault")
	})
	logs := make(logSignal, 16)
	r := provider.NewResilient(NewHTTPClient("sim", f.url, testAPIKey, nil), cfg, slog.New(logs))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan provider.Result, 1)
	go func() { done <- r.CreateCharge(ctx, chargeReq("k1")) }()

	// Cancel during a wait of a second or more (the backoff doubles from
	// 100ms, ±50%), so that a return within half of it, a margin that holds
	// on a busy machine, is the cancel's doing.
	retries := 0
	var wait time.Duration
	for wait < time.Second {
		if rec := waitFor(t, logs, 10*time.Second); rec.msg == "provider call failed, retrying" {
			retries++
			wait = rec.wait
		}
	}
	cancel()
	canceled := time.Now()
	res := waitFor(t, done, 5*time.Second)

	require.Less(t, time.Since(canceled), wait/2, "returned within half of the %s wait", wait)
	require.Equal(t, provider.Unknown, res.Outcome)
	require.Equal(t, retries, res.Tries, "no call after the cancel")
	require.Equal(t, retries, f.Hits())
	require.ErrorIs(t, res.Err, context.Canceled)
	var ce *provider.CallError
	require.ErrorAs(t, res.Err, &ce)
	require.Equal(t, http.StatusServiceUnavailable, ce.Status)
}

func TestCreateChargeStopsWhenCtxCanceledDuringCall(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.CallTimeout, cfg.BreakerFailures = 10*time.Second, 1
	entered := make(chan struct{}, 1)
	var f *fakeProvider
	r, f := setup(t, cfg, func(_ int, _ http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		f.hang(r)
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan provider.Result, 1)
	go func() { done <- r.CreateCharge(ctx, chargeReq("k1")) }()

	waitFor(t, entered, 5*time.Second)
	cancel()
	canceled := time.Now()
	res := waitFor(t, done, 5*time.Second)

	require.Less(t, time.Since(canceled), cfg.CallTimeout/2, "returned long before the call's timeout")
	require.Equal(t, provider.Unknown, res.Outcome)
	require.Equal(t, 1, res.Tries)
	require.Equal(t, 1, f.Hits())
	var ce *provider.CallError
	require.ErrorAs(t, res.Err, &ce)
	require.Equal(t, provider.KindCanceled, ce.Kind)
	// Our own cancellation says nothing about the provider.
	require.False(t, r.BreakerOpen())
}

func TestCreateChargeAlreadyCanceledCtx(t *testing.T) {
	t.Parallel()
	r, f := setup(t, testConfig(), func(_ int, w http.ResponseWriter, _ *http.Request) {
		answerError(w, http.StatusServiceUnavailable, "simulated_fault")
	})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	res := r.CreateCharge(ctx, chargeReq("k1"))

	// Nothing was sent (the API answers NotSent with 503
	// provider_unavailable).
	require.Equal(t, provider.NotSent, res.Outcome)
	require.Equal(t, 0, res.Tries)
	require.Equal(t, 0, f.Hits())
	require.True(t, errors.Is(res.Err, context.Canceled))
}
