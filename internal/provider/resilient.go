package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sony/gobreaker"

	"github.com/acme/paymentsvc/internal/metrics"
)

// Caller is the single-shot provider API that Resilient drives: each method
// is one HTTP call, and a failed call returns a *CallError. Each connector (internal/provider/sim,
// internal/provider/stripe) is one.
type Caller interface {
	Name() string
	PostCharge(ctx context.Context, req ChargeRequest) (Charge, error)
	FindCharge(ctx context.Context, l Lookup) (Charge, error)
	ListCharges(ctx context.Context, q ListQuery) (ChargePage, error)
	PostRefund(ctx context.Context, req RefundRequest) (Refund, error)
	FindRefund(ctx context.Context, l Lookup) (Refund, error)
	PostCapture(ctx context.Context, req CaptureRequest) (Charge, error)
	PostVoid(ctx context.Context, req VoidRequest) (Charge, error)
	GetCharge(ctx context.Context, id string) (Charge, error)
	FindCapture(ctx context.Context, l Lookup) (Hold, error)
	FindVoid(ctx context.Context, l Lookup) (Hold, error)
}

// Config bounds the calls Resilient makes. Zero is not a legal value of any
// field, so a zero field takes the documented default (PROVIDER_CALL_TIMEOUT
// and friends, docs/configuration.md); a negative one is refused by Validate.
type Config struct {
	CallTimeout     time.Duration // one HTTP call
	RetryBudget     time.Duration // no call starts later than this after the first
	BreakerFailures uint32        // consecutive failed calls that open the breaker
	BreakerCooldown time.Duration // how long the breaker stays open
}

// Defaults of Config (docs/configuration.md).
const (
	DefaultCallTimeout     = 3 * time.Second
	DefaultRetryBudget     = 8 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = 10 * time.Second
)

// WithDefaults fills the zero fields. A zero RetryBudget is not "no retries":
// the backoff would read it as "retry forever".
func (c Config) WithDefaults() Config {
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.RetryBudget == 0 {
		c.RetryBudget = DefaultRetryBudget
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = DefaultBreakerFailures
	}
	if c.BreakerCooldown == 0 {
		c.BreakerCooldown = DefaultBreakerCooldown
	}
	return c
}

// Validate refuses negative durations, which no default would make right.
func (c Config) Validate() error {
	if c.CallTimeout < 0 || c.RetryBudget < 0 || c.BreakerCooldown < 0 {
		return fmt.Errorf("provider: negative PROVIDER_CALL_TIMEOUT (%s), PROVIDER_RETRY_BUDGET (%s) or PROVIDER_BREAKER_COOLDOWN (%s)",
			c.CallTimeout, c.RetryBudget, c.BreakerCooldown)
	}
	return nil
}

// Resilient is a Provider that bounds every call to the inner one by
// CallTimeout, retries retryable failures with jittered exponential backoff
// within RetryBudget, and guards all calls with one circuit breaker. It never
// guesses: a charge whose fate it does not know is Unknown.
type Resilient struct {
	inner Caller
	cfg   Config
	log   *slog.Logger
	cb    *gobreaker.TwoStepCircuitBreaker
}

var _ Provider = (*Resilient)(nil)

// NewResilient wraps inner; a nil log discards. It panics on a cfg that
// Validate refuses: the binaries validate their configuration at startup,
// so only a programming error gets here.
func NewResilient(inner Caller, cfg Config, log *slog.Logger) *Resilient {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Resilient{inner: inner, cfg: cfg.WithDefaults(), log: log.With("provider", inner.Name())}
	r.cb = newBreaker(inner.Name(), r.cfg, r.log)
	return r
}

// Name is the inner provider's name.
func (r *Resilient) Name() string { return r.inner.Name() }

// BreakerOpen reports whether a call now would be refused without reaching
// the provider: the breaker is open, or half-open with its one trial call
// already taken. The API checks it before committing PENDING, so a refused
// payment stays CREATED. (A trial taken between this check and the call
// still makes that call return NotSent.)
func (r *Resilient) BreakerOpen() bool {
	switch r.cb.State() {
	case gobreaker.StateOpen:
		return true
	case gobreaker.StateHalfOpen:
		return r.cb.Counts().Requests >= breakerTrialCalls
	}
	return false
}

// CreateCharge charges, retrying under the same idempotency key (the provider
// deduplicates it, so a retry never charges twice).
func (r *Resilient) CreateCharge(ctx context.Context, req ChargeRequest) Result {
	var (
		ch  Charge
		amb ambiguity
	)
	tries, sent, err := r.run(ctx, OpCharge, amb.track(func(ctx context.Context) error {
		var err error
		ch, err = r.inner.PostCharge(ctx, req)
		return err
	}))
	res := classify(tries, sent, err, amb.earlier)
	switch res.Outcome {
	case Succeeded:
		res.Charge = &ch
	case Declined:
		var ce *CallError
		errors.As(err, &ce)
		res.Charge = ce.Charge
	}
	metrics.ProviderChargeOutcomes.WithLabelValues(r.Name(), res.Outcome.String()).Inc()
	log := r.log.With("idempotency_key", req.IdempotencyKey, "reference", req.Reference, "tries", res.Tries, "outcome", res.Outcome.String())
	switch res.Outcome {
	case Unknown:
		log.Warn("provider charge outcome unknown", "err", res.Err)
	case NotSent:
		log.Warn("provider charge not sent", "err", res.Err)
	default:
		log.Info("provider charge answered", "charge", res.Charge.ID)
	}
	return res
}

// classify turns the end of a charge's or refund's retries into a Result.
// NotSent only when no try may have reached the provider (a breaker refusal
// before any try, or tries none of which obtained a connection); everything
// that is neither a success nor a decline (a refusal that proves nothing
// was done) is Unknown, because it may have charged or refunded. A
// Rejected decline after an ambiguous earlier try (ambiguous) is Unknown too.
func classify(tries int, sent bool, err error, ambiguous bool) Result {
	res := Result{Tries: tries}
	var ce *CallError
	if errors.As(err, &ce) {
		res.Anomaly = ce.Anomaly
	}
	switch {
	case err == nil:
		res.Outcome = Succeeded
	case errors.As(err, &ce) && ce.Kind == KindDeclined && ce.Rejected && ambiguous:
		res.Outcome, res.Err = Unknown, fmt.Errorf("%w (after an earlier try that may have reached the provider)", err)
	case errors.As(err, &ce) && ce.Kind == KindDeclined && (ce.Charge != nil || ce.Op != OpCharge):
		res.Outcome, res.DeclineCode, res.Rejected = Declined, ce.Code, ce.Rejected
	case !sent:
		res.Outcome, res.Err = NotSent, err
	default:
		res.Outcome, res.Err = Unknown, err
	}
	return res
}

// ambiguity records whether a try of one call, before its last, may have
// reached the provider without a decisive answer (it was sent and failed:
// a timeout, a 5xx, a 409, a 429, a lost answer; a decisive answer ends
// the run, so any failed try that is followed by another was not one).
type ambiguity struct {
	last    error // the previous try's error
	tried   bool
	earlier bool // a try before the last one was sent and failed
}

// track wraps one try of call.
func (a *ambiguity) track(call func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if a.tried && a.last != nil && !notSent(a.last) {
			a.earlier = true
		}
		err := call(ctx)
		a.tried, a.last = true, err
		return err
	}
}

// FindCharge looks up the charge of a payment's step; ErrNotFound only
// when the provider says it has none.
func (r *Resilient) FindCharge(ctx context.Context, l Lookup) (Charge, error) {
	if l.Key == "" {
		return Charge{}, ErrEmptyKey
	}
	return read(ctx, r, OpLookup, func(ctx context.Context) (Charge, error) { return r.inner.FindCharge(ctx, l) })
}

// ListCharges returns one page of the charges created in [q.From, q.To).
func (r *Resilient) ListCharges(ctx context.Context, q ListQuery) (ChargePage, error) {
	return read(ctx, r, OpList, func(ctx context.Context) (ChargePage, error) { return r.inner.ListCharges(ctx, q) })
}

// read makes a call that changes nothing at the provider (a lookup or a
// list) with r's timeouts, retries and breaker, and returns its answer (the
// zero value with the error).
func read[T any](ctx context.Context, r *Resilient, op string, call func(context.Context) (T, error)) (T, error) {
	var v T
	_, _, err := r.run(ctx, op, func(ctx context.Context) error {
		var err error
		v, err = call(ctx)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// CreateRefund refunds a charge, retrying under the same idempotency key (the
// provider deduplicates it, so a retry never refunds twice).
func (r *Resilient) CreateRefund(ctx context.Context, req RefundRequest) Result {
	var (
		re  Refund
		amb ambiguity
	)
	tries, sent, err := r.run(ctx, OpRefund, amb.track(func(ctx context.Context) error {
		var err error
		re, err = r.inner.PostRefund(ctx, req)
		return err
	}))
	res := classify(tries, sent, err, amb.earlier)
	if res.Outcome == Succeeded {
		res.Refund = &re
	}
	metrics.ProviderRefundOutcomes.WithLabelValues(r.Name(), res.Outcome.String()).Inc()
	log := r.log.With("idempotency_key", req.IdempotencyKey, "reference", req.Reference, "tries", res.Tries, "outcome", res.Outcome.String())
	switch res.Outcome {
	case Unknown, NotSent:
		log.Warn("provider refund not known to be done", "err", res.Err)
	case Declined:
		log.Info("provider refused the refund", "code", res.DeclineCode)
	default:
		log.Info("provider refund answered", "refund", re.ID)
	}
	return res
}

// FindRefund looks up the refund of a step; ErrNotFound only when the
// provider says it has none.
func (r *Resilient) FindRefund(ctx context.Context, l Lookup) (Refund, error) {
	if l.Key == "" {
		return Refund{}, ErrEmptyKey
	}
	return read(ctx, r, OpLookup, func(ctx context.Context) (Refund, error) { return r.inner.FindRefund(ctx, l) })
}

// CaptureCharge captures an authorized charge, retrying under the same
// idempotency key (the provider deduplicates it, so a retry never captures
// twice).
func (r *Resilient) CaptureCharge(ctx context.Context, req CaptureRequest) Result {
	return r.hold(ctx, OpCapture, req.IdempotencyKey, req.Reference, func(ctx context.Context) (Charge, error) {
		return r.inner.PostCapture(ctx, req)
	})
}

// VoidCharge releases an authorized charge, retrying like CaptureCharge.
func (r *Resilient) VoidCharge(ctx context.Context, req VoidRequest) Result {
	return r.hold(ctx, OpVoid, req.IdempotencyKey, req.Reference, func(ctx context.Context) (Charge, error) {
		return r.inner.PostVoid(ctx, req)
	})
}

// hold makes a capture or void call (op) with r's retries and breaker.
func (r *Resilient) hold(ctx context.Context, op, key, reference string, call func(context.Context) (Charge, error)) Result {
	var ch Charge
	tries, sent, err := r.run(ctx, op, func(ctx context.Context) error {
		var err error
		ch, err = call(ctx)
		return err
	})
	res := classify(tries, sent, err, true)
	if res.Outcome == Succeeded {
		res.Charge = &ch
	}
	metrics.ProviderHoldOutcomes.WithLabelValues(r.Name(), op, res.Outcome.String()).Inc()
	log := r.log.With("op", op, "idempotency_key", key, "reference", reference, "tries", res.Tries, "outcome", res.Outcome.String())
	switch res.Outcome {
	case Unknown, NotSent:
		log.Warn("provider "+op+" not known to be done", "err", res.Err)
	case Declined:
		log.Info("provider refused the "+op, "code", res.DeclineCode)
	default:
		log.Info("provider "+op+" answered", "charge", ch.ID)
	}
	return res
}

// GetCharge reads a charge by id; ErrNotFound only when the provider says
// it has none.
func (r *Resilient) GetCharge(ctx context.Context, id string) (Charge, error) {
	if id == "" {
		return Charge{}, ErrEmptyKey
	}
	return read(ctx, r, OpLookup, func(ctx context.Context) (Charge, error) { return r.inner.GetCharge(ctx, id) })
}

// FindCapture looks up the capture of a step; ErrNotFound only when the
// provider says it has none.
func (r *Resilient) FindCapture(ctx context.Context, l Lookup) (Hold, error) {
	return r.findHold(ctx, l, r.inner.FindCapture)
}

// FindVoid looks up the void of a step, like FindCapture.
func (r *Resilient) FindVoid(ctx context.Context, l Lookup) (Hold, error) {
	return r.findHold(ctx, l, r.inner.FindVoid)
}

func (r *Resilient) findHold(ctx context.Context, l Lookup, lookup func(context.Context, Lookup) (Hold, error)) (Hold, error) {
	if l.Key == "" {
		return Hold{}, ErrEmptyKey
	}
	return read(ctx, r, OpLookup, func(ctx context.Context) (Hold, error) { return lookup(ctx, l) })
}

// refusal is a call the breaker did not let through.
func refusal(op string, err error) error {
	return fmt.Errorf("%w: %s refused, circuit breaker: %w", ErrUnavailable, op, err)
}

// BreakerState is the breaker's state now (for tests and diagnostics).
func (r *Resilient) BreakerState() gobreaker.State { return r.cb.State() }

// ConsecutiveFailures is how many calls in a row the breaker counted as
// failed (for tests and diagnostics).
func (r *Resilient) ConsecutiveFailures() uint32 { return r.cb.Counts().ConsecutiveFailures }

// KeyWindow is how long after a step was first sent the inner connector's
// provider still deduplicates its POST by our key (Stripe forgets keys
// after 24 hours: its connector says 23 h); 0 means forever. Past it the
// service never POSTs that step again, it only reads it back.
func (r *Resilient) KeyWindow() time.Duration {
	if kw, ok := r.inner.(interface{ KeyWindow() time.Duration }); ok {
		return kw.KeyWindow()
	}
	return 0
}
