package provider

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/sony/gobreaker"

	"github.com/acme/paymentsvc/internal/metrics"
)

// breakerTrialCalls is how many calls a half-open breaker lets through.
const breakerTrialCalls = 1

// newBreaker is the one breaker of a provider: it opens after
// cfg.BreakerFailures consecutive failed calls, stays open for
// cfg.BreakerCooldown, then lets one trial call through. It is two-step so
// that Resilient, which knows the caller's context, judges each call.
func newBreaker(name string, cfg Config, log *slog.Logger) *gobreaker.TwoStepCircuitBreaker {
	gauge := metrics.BreakerState.WithLabelValues(name)
	gauge.Set(breakerGaugeValue(gobreaker.StateClosed))
	return gobreaker.NewTwoStepCircuitBreaker(gobreaker.Settings{
		Name:        name,
		MaxRequests: breakerTrialCalls,
		Timeout:     cfg.BreakerCooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= cfg.BreakerFailures
		},
		// Called under the breaker's lock: it must not call the breaker.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			gauge.Set(breakerGaugeValue(to))
			log.Warn("provider circuit breaker changed state", "from", from.String(), "to", to.String())
		},
	})
}

// breakerGaugeValue is the BreakerState gauge's encoding: 0 closed, 1 half-open, 2 open.
func breakerGaugeValue(s gobreaker.State) float64 {
	switch s {
	case gobreaker.StateHalfOpen:
		return 1
	case gobreaker.StateOpen:
		return 2
	}
	return 0
}

// isRefusal reports whether err is the breaker refusing a call.
func isRefusal(err error) bool {
	return errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests)
}

// providerFailed reports whether a call's error says the provider is unwell:
// transport errors, timeouts and 5xx. Declines and other 4xx are answers of
// a provider that is up. A call cut short by the caller's own context says
// nothing about the provider, so it is not held against it.
func providerFailed(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var ce *CallError
	if !errors.As(err, &ce) {
		return !errors.Is(err, ErrEmptyKey)
	}
	switch ce.Kind {
	case KindTransport, KindTimeout:
		return true
	case KindStatus:
		return ce.Status >= http.StatusInternalServerError
	}
	return false
}

// retryable reports whether a failed call may succeed if made again:
// transport errors, timeouts, 5xx, 409 (a concurrent request with the same
// key) and 429. Any other 4xx, a decline or a nonsense answer will not change.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var ce *CallError
	if !errors.As(err, &ce) {
		return !errors.Is(err, ErrEmptyKey)
	}
	if ce.Retry != nil {
		return *ce.Retry
	}
	switch ce.Kind {
	case KindTransport, KindTimeout:
		return true
	case KindStatus:
		return ce.Status >= http.StatusInternalServerError ||
			ce.Status == http.StatusConflict || ce.Status == http.StatusTooManyRequests
	}
	return false
}

// resultLabel is the result label of ProviderCalls for one call's error.
func resultLabel(err error) string {
	if err == nil {
		return "ok"
	}
	if isRefusal(err) {
		return "breaker_open"
	}
	var ce *CallError
	if !errors.As(err, &ce) {
		return "transport"
	}
	switch ce.Kind {
	case KindStatus:
		switch {
		case errors.Is(err, ErrNotFound):
			return "not_found"
		case ce.Status >= http.StatusInternalServerError:
			return "http_5xx"
		}
		return "http_4xx"
	case KindDeclined, KindTimeout, KindTransport, KindCanceled, KindBadResponse:
		return ce.Kind.String()
	}
	return "transport"
}
