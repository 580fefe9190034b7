package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/acme/paymentsvc/internal/metrics"
)

// Backoff between retries: 100ms, 200ms, 400ms … capped at 2s, each ±50%.
const (
	retryInitialInterval = 100 * time.Millisecond
	retryMultiplier      = 2
	retryMaxInterval     = 2 * time.Second
	retryJitter          = 0.5
)

// run makes call through the breaker until it succeeds, fails for good, the
// retry budget is spent, the breaker refuses, or ctx ends. tries counts the
// calls made (refusals are not calls); sent reports whether any of them may
// have reached the provider (a connection was obtained for it, see
// CallError.Sent). The error is the last call's, except a refusal before any
// call, which wraps ErrUnavailable. A charge or refund try that was not sent
// ends the run at once, so that the caller can go to another provider within
// the same budget.
func (r *Resilient) run(ctx context.Context, op string, call func(context.Context) error) (tries int, sent bool, err error) {
	// A call doomed before it starts would take the breaker's half-open trial
	// slot and report nothing about the provider.
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("provider %s: not called: %w", op, err)
	}
	var (
		last    error // the last call's error
		refused bool  // the breaker refused the last try
	)
	movesMoney := op == OpCharge || op == OpRefund || op == OpCapture || op == OpVoid
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(retryInitialInterval),
		backoff.WithRandomizationFactor(retryJitter),
		backoff.WithMultiplier(retryMultiplier),
		backoff.WithMaxInterval(retryMaxInterval),
		// The backoff stops before a wait would end past the budget, so no call
		// starts after it and the whole run ends within budget + CallTimeout.
		backoff.WithMaxElapsedTime(r.cfg.RetryBudget),
	), ctx)
	err = backoff.RetryNotify(func() error {
		err := r.callOnce(ctx, op, call)
		if isRefusal(err) {
			refused = true
			return backoff.Permanent(refusal(op, err))
		}
		tries++
		last = err
		thisSent := !notSent(err)
		sent = sent || thisSent
		if err != nil && (!retryable(ctx, err) || (movesMoney && !thisSent)) {
			return backoff.Permanent(err)
		}
		return err
	}, b, func(err error, wait time.Duration) {
		metrics.ProviderRetries.WithLabelValues(r.Name(), op).Inc()
		r.log.Info("provider call failed, retrying", "op", op, "try", tries, "wait", wait.String(), "err", err)
	})
	switch {
	case err == nil, refused && tries == 0:
		return tries, sent, err
	case refused:
		// After a try: the answer is the last call's error, not
		// ErrUnavailable (if it was sent, the refusal proves nothing about it).
		return tries, sent, fmt.Errorf("%w (retries stopped: circuit breaker open)", last)
	case ctx.Err() != nil && err == ctx.Err() && last != nil:
		// ctx ended while waiting for the next try; the backoff returns only ctx.Err().
		return tries, sent, fmt.Errorf("%w (retries stopped: %w)", last, err)
	}
	return tries, sent, err
}

// notSent reports whether a try's error proves that it never reached the
// provider: no connection was obtained for it (the HTTP client's hidden
// retries included), decided by when the connection was obtained, never by
// the error's text.
func notSent(err error) bool {
	var ce *CallError
	return errors.As(err, &ce) && !ce.Sent
}

// callOnce makes one call, bounded by CallTimeout, if the breaker allows it,
// and reports its outcome to the breaker and the metrics.
func (r *Resilient) callOnce(ctx context.Context, op string, call func(context.Context) error) (err error) {
	done, err := r.cb.Allow()
	if err != nil {
		metrics.ProviderCalls.WithLabelValues(r.Name(), op, resultLabel(err)).Inc()
		return err
	}
	// Deferred so that even a panicking call releases the half-open trial slot.
	failed := true
	defer func() { done(!failed) }()

	callCtx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	start := time.Now()
	err = call(callCtx)
	metrics.ProviderCallDuration.WithLabelValues(r.Name(), op).Observe(time.Since(start).Seconds())
	metrics.ProviderCalls.WithLabelValues(r.Name(), op, resultLabel(err)).Inc()
	failed = providerFailed(ctx, err)
	return err
}
