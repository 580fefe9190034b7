package sim

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testkit"

	"github.com/acme/paymentsvc/internal/provider"
)

func TestBreakerOpensThenLetsOneTrialThrough(t *testing.T) {
	t.Parallel()
	const (
		failing = iota
		gated
	)
	var mode atomic.Int32
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var f *fakeProvider
	f = newFake(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if mode.Load() == failing {
			answerError(w, http.StatusServiceUnavailable, "simulated_fault")
			return
		}
		entered <- struct{}{}
		select {
		case <-release:
		case <-f.stop:
		}
		f.answerCharge(w, r)
	})
	name := "sim-" + t.Name()
	cfg := provider.Config{CallTimeout: time.Second, RetryBudget: time.Millisecond, BreakerFailures: 3, BreakerCooldown: 200 * time.Millisecond}
	r := provider.NewResilient(NewHTTPClient(name, f.url, testAPIKey, nil), cfg, nil)
	require.Equal(t, 0.0, gaugeValue(t, name))

	// A 1ms budget leaves no room for a retry: one call per charge.
	for i := range 3 {
		require.False(t, r.BreakerOpen(), "before failure %d", i+1)
		res := r.CreateCharge(t.Context(), chargeReq("k-fail"))
		require.Equal(t, provider.Unknown, res.Outcome)
		require.Equal(t, 1, res.Tries)
	}
	require.Equal(t, 3, f.Hits())
	require.True(t, r.BreakerOpen())
	require.Equal(t, 2.0, gaugeValue(t, name))

	res := r.CreateCharge(t.Context(), chargeReq("k-refused"))
	require.Equal(t, provider.NotSent, res.Outcome)
	require.Equal(t, 0, res.Tries)
	require.ErrorIs(t, res.Err, provider.ErrUnavailable)
	require.ErrorIs(t, res.Err, gobreaker.ErrOpenState)
	require.Equal(t, 3, f.Hits())

	testkit.Eventually(t, 5*time.Second, "the breaker's cooldown ends", func() bool { return !r.BreakerOpen() })
	require.Equal(t, gobreaker.StateHalfOpen, r.BreakerState())
	require.Equal(t, 1.0, gaugeValue(t, name))

	mode.Store(gated)
	trial := make(chan provider.Result, 1)
	go func() { trial <- r.CreateCharge(t.Context(), chargeReq("k-trial")) }()
	waitFor(t, entered, 5*time.Second)

	// While the trial is in flight, nothing else gets through, and the API
	// is told so before it commits anything.
	require.True(t, r.BreakerOpen())
	res = r.CreateCharge(t.Context(), chargeReq("k-second"))
	require.Equal(t, provider.NotSent, res.Outcome)
	require.ErrorIs(t, res.Err, provider.ErrUnavailable)
	require.ErrorIs(t, res.Err, gobreaker.ErrTooManyRequests)
	require.Equal(t, 4, f.Hits())

	close(release)
	res = waitFor(t, trial, 5*time.Second)
	require.Equal(t, provider.Succeeded, res.Outcome)
	require.Equal(t, 1, res.Tries)
	require.Equal(t, gobreaker.StateClosed, r.BreakerState())
	require.Equal(t, 0.0, gaugeValue(t, name))

	res = r.CreateCharge(t.Context(), chargeReq("k-after"))
	require.Equal(t, provider.Succeeded, res.Outcome)
	require.Equal(t, 5, f.Hits())
}

func TestBreakerFailedTrialReopens(t *testing.T) {
	t.Parallel()
	r, f := setup(t, provider.Config{CallTimeout: time.Second, RetryBudget: time.Millisecond, BreakerFailures: 2, BreakerCooldown: 100 * time.Millisecond},
		func(_ int, w http.ResponseWriter, _ *http.Request) {
			answerError(w, http.StatusInternalServerError, "internal_error")
		})
	for range 2 {
		require.Equal(t, provider.Unknown, r.CreateCharge(t.Context(), chargeReq("k1")).Outcome)
	}
	require.True(t, r.BreakerOpen())
	testkit.Eventually(t, 5*time.Second, "the breaker's cooldown ends", func() bool { return !r.BreakerOpen() })

	res := r.CreateCharge(t.Context(), chargeReq("k1"))

	require.Equal(t, provider.Unknown, res.Outcome)
	require.Equal(t, 1, res.Tries)
	require.True(t, r.BreakerOpen())
	require.Equal(t, 3, f.Hits())
	require.Equal(t, provider.NotSent, r.CreateCharge(t.Context(), chargeReq("k2")).Outcome)
	require.Equal(t, 3, f.Hits())
}

func TestBreakerOpeningMidRetryIsUnknown(t *testing.T) {
	t.Parallel()
	r, f := setup(t, provider.Config{CallTimeout: time.Second, RetryBudget: 5 * time.Second, BreakerFailures: 2, BreakerCooldown: time.Minute},
		func(_ int, w http.ResponseWriter, _ *http.Request) {
			answerError(w, http.StatusBadGateway, "")
		})

	res := r.CreateCharge(t.Context(), chargeReq("k1"))

	require.Equal(t, provider.Unknown, res.Outcome)
	require.Equal(t, 2, res.Tries)
	require.Equal(t, 2, f.Hits())
	// Something was sent: the refusal that stopped the retries is not the answer.
	require.NotErrorIs(t, res.Err, provider.ErrUnavailable)
	var ce *provider.CallError
	require.ErrorAs(t, res.Err, &ce)
	require.Equal(t, http.StatusBadGateway, ce.Status)
	require.True(t, r.BreakerOpen())
}

func TestBreakerIgnoresDeclines(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.BreakerFailures = 3
	var f *fakeProvider
	r, f := setup(t, cfg, func(_ int, w http.ResponseWriter, r *http.Request) { f.answerCharge(w, r) })

	for i := range 10 {
		res := r.CreateCharge(t.Context(), declinedReq("k"+string(rune('a'+i))))
		require.Equal(t, provider.Declined, res.Outcome)
		require.Equal(t, 1, res.Tries)
	}

	require.Equal(t, 10, f.Hits())
	require.Equal(t, gobreaker.StateClosed, r.BreakerState())
	require.False(t, r.BreakerOpen())
}

func TestBreakerRefusesLookups(t *testing.T) {
	t.Parallel()
	r, f := setup(t, provider.Config{CallTimeout: time.Second, RetryBudget: time.Millisecond, BreakerFailures: 1, BreakerCooldown: time.Minute},
		func(_ int, w http.ResponseWriter, _ *http.Request) {
			answerError(w, http.StatusServiceUnavailable, "")
		})
	_, err := r.FindCharge(t.Context(), provider.Lookup{Key: "k1"})
	require.Error(t, err)
	require.NotErrorIs(t, err, provider.ErrUnavailable)
	require.True(t, r.BreakerOpen())

	_, err = r.FindCharge(t.Context(), provider.Lookup{Key: "k1"})
	require.ErrorIs(t, err, provider.ErrUnavailable)
	_, err = r.ListCharges(t.Context(), provider.ListQuery{From: time.Unix(0, 0), To: time.Unix(10, 0)})
	require.ErrorIs(t, err, provider.ErrUnavailable)
	res := r.CreateRefund(t.Context(), provider.RefundRequest{ChargeID: "ch_1", IdempotencyKey: "rk1"})
	require.Equal(t, provider.NotSent, res.Outcome)
	require.ErrorIs(t, res.Err, provider.ErrUnavailable)
	_, err = r.FindRefund(t.Context(), provider.Lookup{Key: "rk1"})
	require.ErrorIs(t, err, provider.ErrUnavailable)
	require.Equal(t, 1, f.Hits())
}

// Only a zero field is "unset"; a negative one is a mistake that no default
// makes right, so NewResilient refuses it instead of replacing it.
func TestConfigZeroTakesDefaultsNegativeRefused(t *testing.T) {
	t.Parallel()
	require.Equal(t, provider.Config{CallTimeout: provider.DefaultCallTimeout, RetryBudget: provider.DefaultRetryBudget,
		BreakerFailures: provider.DefaultBreakerFailures, BreakerCooldown: provider.DefaultBreakerCooldown}, provider.Config{}.WithDefaults())
	for _, c := range []provider.Config{{CallTimeout: -time.Second}, {RetryBudget: -time.Second}, {BreakerCooldown: -time.Second}} {
		require.Error(t, c.Validate(), "%+v", c)
		require.Panics(t, func() { provider.NewResilient(NewHTTPClient("sim", "http://127.0.0.1:9", testAPIKey, nil), c, nil) }, "%+v", c)
	}
	require.NoError(t, provider.Config{}.Validate())
}
