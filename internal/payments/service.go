package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/routing"
)

// Provider is what the service needs of the provider: its calls, and
// whether its circuit breaker would refuse a call now.
type Provider interface {
	provider.Provider
	BreakerOpen() bool
}

// Defaults of the idempotency timings (docs/configuration.md); the
// provider's are provider.Default*.
const (
	DefaultLockTTL = 30 * time.Second
	DefaultKeyTTL  = idempotency.DefaultKeyTTL
)

// Config holds the timing settings of the create path.
type Config struct {
	LockTTL         time.Duration
	KeyTTL          time.Duration
	CallTimeout     time.Duration
	RetryBudget     time.Duration
	BreakerCooldown time.Duration
}

// WithDefaults fills zero fields with the documented defaults.
func (c Config) WithDefaults() Config {
	if c.LockTTL == 0 {
		c.LockTTL = DefaultLockTTL
	}
	if c.KeyTTL == 0 {
		c.KeyTTL = DefaultKeyTTL
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = provider.DefaultCallTimeout
	}
	if c.RetryBudget == 0 {
		c.RetryBudget = provider.DefaultRetryBudget
	}
	if c.BreakerCooldown == 0 {
		c.BreakerCooldown = provider.DefaultBreakerCooldown
	}
	return c
}

// Validate refuses settings under which a lock could expire while its owner
// may still be talking to the provider.
func (c Config) Validate() error {
	if c.LockTTL <= c.RetryBudget+c.CallTimeout {
		return fmt.Errorf("IDEMPOTENCY_LOCK_TTL (%s) must be longer than PROVIDER_RETRY_BUDGET + PROVIDER_CALL_TIMEOUT (%s): a lock must never expire while its owner may still be talking to the provider",
			c.LockTTL, c.RetryBudget+c.CallTimeout)
	}
	if c.KeyTTL <= c.LockTTL {
		return fmt.Errorf("IDEMPOTENCY_KEY_TTL (%s) must be longer than IDEMPOTENCY_LOCK_TTL (%s)", c.KeyTTL, c.LockTTL)
	}
	if c.CallTimeout <= 0 || c.RetryBudget <= 0 {
		return errors.New("PROVIDER_CALL_TIMEOUT and PROVIDER_RETRY_BUDGET must be positive")
	}
	return nil
}

func (c Config) keys() idempotency.Config {
	return idempotency.Config{LockTTL: c.LockTTL, KeyTTL: c.KeyTTL}
}

// Service runs payments.
type Service struct {
	pool      *db.Pool
	providers map[string]Provider
	order     []Provider // the default routing order
	names     []string   // their names, in that order
	cfg       Config
	log       *slog.Logger
	replays   *idempotency.ReplayCache // nil: off
	wakeup    outbox.Wakeup            // nil: none
}

// UseReplayCache makes creates answer completed keys from c before any SQL
// (nil: off, the default). Set it before the first request.
func (s *Service) UseReplayCache(c *idempotency.ReplayCache) { s.replays = c }

// UseOutboxWakeup makes the create path signal w after each commit that
// wrote an event, which sends no NOTIFY (see outbox.Wakeup); give the same
// w to this process's relay, or to outbox.Notify when it runs none. nil
// (the default): those events wait for a relay's poll. Set it before the
// first request.
func (s *Service) UseOutboxWakeup(w outbox.Wakeup) { s.wakeup = w }

// ReplayBody answers a create on (tenantID, key) with raw body body, when
// this pod's replay cache replayed the same bytes on that key before: the
// stored answer, before the body is decoded or fingerprinted (the same
// bytes have the same fingerprint, and were valid). ok is false otherwise:
// decode the body and Create, as always, with CreateInput.BodySum = sum
// (the zero sum, and no hashing, when the cache is off).
func (s *Service) ReplayBody(tenantID, key string, body []byte) (reply Reply, sum idempotency.BodySum, ok bool) {
	if s.replays == nil {
		return Reply{}, sum, false
	}
	sum = idempotency.SumBody(body)
	res, ok := s.replays.AnswerBody(tenantID, key, sum)
	if !ok {
		return Reply{}, sum, false
	}
	reply, _, _ = keyAnswer(res, res.AttemptID) // a Replay: never an error
	return reply, sum, true
}

// NewService returns a Service with one provider; cfg must be valid. A nil
// log discards.
func NewService(pool *db.Pool, p Provider, cfg Config, log *slog.Logger) (*Service, error) {
	return NewRouted(pool, []Provider{p}, cfg, log)
}

// NewRouted returns a Service that routes payments to providers (in their
// default order; names unique); cfg must be valid. A nil log discards.
func NewRouted(pool *db.Pool, providers []Provider, cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(providers) == 0 {
		return nil, errors.New("payments: no provider")
	}
	byName := make(map[string]Provider, len(providers))
	for _, p := range providers {
		if _, dup := byName[p.Name()]; dup {
			return nil, fmt.Errorf("payments: provider %q named twice", p.Name())
		}
		byName[p.Name()] = p
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	names := make([]string, len(providers))
	for i, p := range providers {
		names[i] = p.Name()
	}
	return &Service{pool: pool, providers: byName, order: providers, names: names, cfg: cfg, log: log}, nil
}

// Config returns the service's timing settings.
func (s *Service) Config() Config { return s.cfg }

// Providers returns the providers, in their default routing order.
func (s *Service) Providers() []Provider { return s.order }

// ProviderNames returns the providers' names, in their default routing order.
// The slice is the service's: callers must not change it.
func (s *Service) ProviderNames() []string { return s.names }

// pinned is the provider a subject that may have reached one is at. One
// that records none (written before providers were recorded) can only be
// at the one provider of a single-provider setup; with several, "" (and
// Provider refuses it).
func (s *Service) pinned(sub subject) string {
	if sub.provider == "" && len(s.order) == 1 {
		return s.order[0].Name()
	}
	return sub.provider
}

// ErrProviderNotConfigured means a name is not one of the configured
// providers (PROVIDERS): a stored routing rule, a payment's route or the
// provider a payment or refund is at may name one removed since.
var ErrProviderNotConfigured = errors.New("provider not configured (PROVIDERS)")

// Provider returns the provider called name; an attempt at a provider that
// is no longer configured cannot be driven or asked
// (ErrProviderNotConfigured).
func (s *Service) Provider(name string) (Provider, error) {
	p, ok := s.providers[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrProviderNotConfigured, name)
	}
	return p, nil
}

// CreateInput is a validated POST /v1/payments.
type CreateInput struct {
	Origin         // who asks: the tenant API unless set
	TenantID       string
	IdempotencyKey string
	Fingerprint    []byte
	// BodySum, if not zero, is the sum of the raw body Fingerprint is of
	// (from ReplayBody): a replay answered from the replay cache keeps it,
	// so that the same bytes sent again are answered before they are
	// decoded.
	BodySum       idempotency.BodySum
	OrderID       string
	Amount        int64
	Currency      string
	PaymentMethod string
	Description   *string
	Metadata      map[string]string
	// CaptureMethod is attempts.CaptureAutomatic (also when empty) or
	// attempts.CaptureManual (only authorize; capture later).
	CaptureMethod string
}

// attempt is the attempt in describes, with its id and route.
func (in CreateInput) attempt(id string, route []string) attempts.New {
	return attempts.New{
		ID: id, TenantID: in.TenantID, OrderID: in.OrderID, IdempotencyKey: in.IdempotencyKey,
		Amount: in.Amount, Currency: in.Currency, PaymentMethod: in.PaymentMethod,
		Description: in.Description, Metadata: in.Metadata, Route: route, CaptureMethod: in.CaptureMethod,
	}
}

// Reply is an answer to a create request: an HTTP status and the payment as
// JSON, possibly replayed from the key's stored response.
type Reply struct {
	Code      int
	Body      []byte
	Replayed  bool
	PaymentID string
	RefundID  string // for a refund's answer, when known
	// OperationID is a capture's or void's id, for its answer.
	OperationID string
}

// StatusCode is the HTTP status that answers a payment (or an operation on
// one) in status s: 201 once it succeeded or is authorized, 402 once it
// failed or was canceled (no money moved), else 202 (not final yet).
func StatusCode(s attempts.Status) int {
	switch s {
	case attempts.Succeeded, attempts.Authorized:
		return http.StatusCreated
	case attempts.Failed, attempts.Canceled:
		return http.StatusPaymentRequired
	}
	return http.StatusAccepted
}

// Create runs one POST /v1/payments.
func (s *Service) Create(ctx context.Context, in CreateInput) (Reply, error) {
	if reply, done, err := s.createFast(ctx, in); done {
		return reply, err
	}
	for range 3 {
		var created attempts.Attempt // the new key's attempt, as inserted
		res, err := idempotency.Acquire(ctx, s.pool, s.cfg.keys(), in.TenantID, in.IdempotencyKey, in.Fingerprint,
			attempts.NewID(), func(ctx context.Context, tx pgx.Tx, attemptID string) error {
				// The route is fixed now: rules apply to payments created
				// after they were stored.
				rules, err := routing.Get(ctx, tx, in.TenantID)
				if err != nil {
					return err
				}
				created, err = attempts.Insert(ctx, tx, in.attempt(attemptID, routing.Route(rules, in.Currency, s.ProviderNames())))
				return err
			})
		if errors.Is(err, db.ErrConflict) {
			live, lerr := attempts.LiveForOrder(ctx, s.pool, in.TenantID, in.OrderID)
			if errors.Is(lerr, attempts.ErrNotFound) {
				continue // that payment failed meanwhile: try again
			}
			if lerr != nil {
				return Reply{}, lerr
			}
			metrics.IdempotencyOutcomes.WithLabelValues("order_conflict").Inc()
			e := apperr.New(apperr.OrderAlreadyHasPay, "order %q already has payment %s in status %s", in.OrderID, live.ID, live.Status)
			e.PaymentID = live.ID
			return Reply{}, e
		}
		if err != nil {
			return Reply{}, err
		}
		if reply, done, err := keyAnswer(res, res.AttemptID); done {
			return reply, err
		}
		k := charges{s}
		if res.Created {
			k.counted(attempts.Created, attempts.SourceAPI)
			failpoint.Hit(failpoint.AfterKeyAcquired)
		} else {
			// A takeover: the attempt's status, committed by whoever held
			// the key before, is the recovery point.
			if created, err = attempts.Get(context.WithoutCancel(ctx), s.pool, res.AttemptID); err != nil {
				return Reply{}, err
			}
		}
		return s.drive(ctx, k, res.Lock, paymentSubject(created), nil, in.Origin)
	}
	return Reply{}, errors.New("order guard kept changing under concurrent use")
}
