package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/provider"
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
	DefaultKeyTTL  = 48 * time.Hour
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
	pool     *db.Pool
	provider Provider
	cfg      Config
	log      *slog.Logger
}

// NewService returns a Service; cfg must be valid. A nil log discards.
func NewService(pool *db.Pool, p Provider, cfg Config, log *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{pool: pool, provider: p, cfg: cfg, log: log}, nil
}

// Config returns the service's timing settings.
func (s *Service) Config() Config { return s.cfg }

// Provider returns the provider the service calls.
func (s *Service) Provider() Provider { return s.provider }

// CreateInput is a validated POST /v1/payments.
type CreateInput struct {
	TenantID       string
	IdempotencyKey string
	Fingerprint    []byte
	OrderID        string
	Amount         int64
	Currency       string
	PaymentMethod  string
	Description    *string
	Metadata       map[string]string
}

// Reply is an answer to a create request: an HTTP status and the payment as
// JSON, possibly replayed from the key's stored response.
type Reply struct {
	Code      int
	Body      []byte
	Replayed  bool
	PaymentID string
}

// StatusCode is the HTTP status that answers a payment in status s.
func StatusCode(s attempts.Status) int {
	switch s {
	case attempts.Succeeded:
		return http.StatusCreated
	case attempts.Failed:
		return http.StatusPaymentRequired
	}
	return http.StatusAccepted
}

// Create runs one POST /v1/payments.
func (s *Service) Create(ctx context.Context, in CreateInput) (Reply, error) {
	for range 3 {
		var created attempts.Attempt // the new key's attempt, as inserted
		res, err := idempotency.Acquire(ctx, s.pool, s.cfg.keys(), in.TenantID, in.IdempotencyKey, in.Fingerprint,
			attempts.NewID(), func(ctx context.Context, tx pgx.Tx, attemptID string) error {
				var err error
				created, err = attempts.Insert(ctx, tx, attempts.New{
					ID: attemptID, TenantID: in.TenantID, OrderID: in.OrderID, IdempotencyKey: in.IdempotencyKey,
					Amount: in.Amount, Currency: in.Currency, PaymentMethod: in.PaymentMethod,
					Description: in.Description, Metadata: in.Metadata,
				})
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
		switch res.Outcome {
		case idempotency.Replay:
			metrics.IdempotencyOutcomes.WithLabelValues("replayed").Inc()
			return Reply{Code: res.ResponseCode, Body: res.ResponseBody, Replayed: true, PaymentID: res.AttemptID}, nil
		case idempotency.InUse:
			metrics.IdempotencyOutcomes.WithLabelValues("in_use").Inc()
			e := apperr.New(apperr.IdempotencyKeyInUse, "a request with this Idempotency-Key is in progress; retry later")
			e.RetryAfter = res.RetryAfter
			return Reply{}, e
		case idempotency.Mismatch:
			metrics.IdempotencyOutcomes.WithLabelValues("reused_mismatch").Inc()
			return Reply{}, apperr.New(apperr.IdempotencyKeyReused, "this Idempotency-Key was used for a different request")
		}
		if res.Created {
			metrics.IdempotencyOutcomes.WithLabelValues("created").Inc()
			countTransition(attempts.Created, attempts.SourceAPI)
			failpoint.Hit(failpoint.AfterKeyAcquired)
		} else {
			metrics.IdempotencyOutcomes.WithLabelValues("resumed").Inc()
		}
		if !res.Created {
			// A takeover: the attempt's status, committed by whoever held
			// the key before, is the recovery point.
			if created, err = attempts.Get(context.WithoutCancel(ctx), s.pool, res.AttemptID); err != nil {
				return Reply{}, err
			}
		}
		return s.drive(ctx, res.Lock, created)
	}
	return Reply{}, errors.New("order guard kept changing under concurrent use")
}

// drive continues an attempt from its status while holding the key's lock.
func (s *Service) drive(ctx context.Context, lock idempotency.Lock, a attempts.Attempt) (Reply, error) {
	// From here on, work that may have charged a customer must finish even if
	// the client hangs up.
	ctx = context.WithoutCancel(ctx)
	if a.Status.Final() {
		return s.finish(ctx, lock, attempts.Change{ID: a.ID, To: a.Status, Source: attempts.SourceAPI})
	}
	if s.provider.BreakerOpen() {
		return s.unavailable(ctx, lock)
	}
	committedPending, err := s.markCalling(ctx, lock, a)
	if err != nil {
		if errors.Is(err, errLostLock) {
			// Another owner (or the reconciler, which failed the attempt as
			// abandoned) took the key while we stalled: call nothing.
			return s.current(ctx, a.ID)
		}
		return Reply{}, err
	}
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.RetryBudget+s.cfg.CallTimeout)
	defer cancel()
	r := s.provider.CreateCharge(callCtx, provider.ChargeRequest{
		Amount: a.Amount, Currency: a.Currency, PaymentMethod: a.PaymentMethod,
		Reference: a.ID, IdempotencyKey: attempts.ProviderKey(a.ID),
	})
	switch r.Outcome {
	case provider.Succeeded:
		failpoint.Hit(failpoint.AfterProviderCall)
		return s.finish(ctx, lock, attempts.Change{
			ID: a.ID, To: attempts.Succeeded, ChargeID: r.Charge.ID, Source: attempts.SourceAPI, Reason: "provider charged",
		})
	case provider.Declined:
		return s.finish(ctx, lock, attempts.Change{
			ID: a.ID, To: attempts.Failed, ChargeID: r.Charge.ID, FailureCode: r.DeclineCode,
			Source: attempts.SourceAPI, Reason: "provider declined",
		})
	case provider.NotSent:
		return s.notSent(ctx, lock, a.ID, committedPending)
	}
	s.log.Warn("provider outcome unknown", "payment_id", a.ID, "tries", r.Tries, "err", r.Err)
	return s.finish(ctx, lock, attempts.Change{
		ID: a.ID, To: attempts.Unknown, Source: attempts.SourceAPI, Reason: unknownReason(r.Err),
	})
}

func unknownReason(err error) string {
	if err == nil {
		return "provider outcome unknown"
	}
	return "provider outcome unknown: " + err.Error()
}

// markCalling commits PENDING before the first provider call, or records a
// resumed call on an attempt that is already PENDING or UNKNOWN, only while
// lock still holds, so a stalled owner whose key was taken over calls
// nothing. In the same transaction it renews the lock for a whole lock TTL
// from the moment it commits, so that however long this request waited for
// the database (a pool connection, a row lock), the lock outlives the
// provider call that starts now. committedPending reports whether this call
// moved the attempt from CREATED to PENDING.
func (s *Service) markCalling(ctx context.Context, lock idempotency.Lock, a attempts.Attempt) (committedPending bool, err error) {
	err = s.underLock(ctx, lock, func(tx pgx.Tx) error {
		if a.Status != attempts.Created {
			if err := attempts.Touch(ctx, tx, a.ID); err != nil {
				return err
			}
		} else {
			now, ok, err := attempts.Transition(ctx, tx, attempts.Change{
				ID: a.ID, To: attempts.Pending, Source: attempts.SourceAPI, Reason: "calling provider",
			})
			if err != nil {
				return err
			}
			if !ok && now.Status != attempts.Pending {
				return errLostLock // moved on without us: never call the provider for it
			}
			committedPending = ok
		}
		// Last, so that the clock it reads is as late as the commit allows.
		held, err := idempotency.Renew(ctx, tx, lock, s.cfg.LockTTL)
		if err == nil && !held {
			err = errLostLock
		}
		return err
	})
	if err != nil {
		return false, err
	}
	if committedPending {
		countTransition(attempts.Pending, attempts.SourceAPI)
	}
	return committedPending, nil
}

// notSent answers a request none of whose provider calls was sent (the
// breaker refused the call after our check): 503, key released, nothing
// charged. If this request committed PENDING, the attempt goes back to
// CREATED (not_sent), so a refused payment never stays PENDING. An attempt
// that was PENDING or UNKNOWN before this request stays as it is: an earlier
// request's call may have reached the provider.
func (s *Service) notSent(ctx context.Context, lock idempotency.Lock, id string, committedPending bool) (Reply, error) {
	if !committedPending {
		return s.unavailable(ctx, lock)
	}
	// finish releases the key: CREATED is not final.
	_, err := s.finish(ctx, lock, attempts.Change{
		ID: id, To: attempts.Created, Source: attempts.SourceAPI, Reason: lifecycle.ReasonNotSent,
	})
	if err != nil {
		return Reply{}, err
	}
	return Reply{}, s.unavailableError()
}

// countTransition counts a committed transition. It is called after the
// commit, so a rolled-back transaction is never counted; the webhook handler
// counts its own transitions the same way.
func countTransition(to attempts.Status, src attempts.Source) {
	metrics.AttemptTransitions.WithLabelValues(string(to), string(src)).Inc()
}

// unavailable releases the key without a response and answers 503.
func (s *Service) unavailable(ctx context.Context, lock idempotency.Lock) (Reply, error) {
	if _, err := idempotency.Release(ctx, s.pool, lock); err != nil {
		return Reply{}, err
	}
	return Reply{}, s.unavailableError()
}

// unavailableError is the 503 of a request that reached no provider.
func (s *Service) unavailableError() error {
	e := apperr.New(apperr.ProviderUnavailable, "the payment provider is unavailable; nothing was charged by this request; retry with the same Idempotency-Key")
	e.RetryAfter = int(math.Max(1, math.Ceil(s.cfg.BreakerCooldown.Seconds())))
	return e
}

var errLostLock = errors.New("idempotency lock lost")

// underLock runs fn in a transaction that first holds the key row under
// lock, so nothing fn writes commits unless this request still owns the key;
// errLostLock if it does not.
func (s *Service) underLock(ctx context.Context, lock idempotency.Lock, fn func(tx pgx.Tx) error) error {
	return db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		held, err := idempotency.Hold(ctx, tx, lock)
		if err != nil {
			return err
		}
		if !held {
			return errLostLock
		}
		return fn(tx)
	})
}

// finish applies c and settles the key in one transaction, only while lock
// still holds: a final status stores the key's response; an unresolved one
// unlocks the key so that a retry resumes it. Whatever the transition finds
// (a webhook may have resolved the attempt first), the answer is the
// attempt's status as committed.
func (s *Service) finish(ctx context.Context, lock idempotency.Lock, c attempts.Change) (Reply, error) {
	var (
		reply   Reply
		applied bool
	)
	err := s.underLock(ctx, lock, func(tx pgx.Tx) error {
		a, ok, err := attempts.Transition(ctx, tx, c)
		applied = ok
		if err != nil {
			return err
		}
		if !applied && c.To.Final() && conflicts(a, c) {
			if err := attempts.RecordAnomaly(ctx, tx, conflictAnomaly(a, c)); err != nil {
				return err
			}
		}
		reply, err = FinishKey(ctx, tx, lock, a)
		if err != nil {
			return err
		}
		failpoint.Hit(failpoint.BeforeCompleteCommit)
		return nil
	})
	if errors.Is(err, errLostLock) {
		// Another owner took the key over; it will store the response.
		// Answer what is committed, without storing anything.
		s.log.Warn("idempotency lock lost before completion", "payment_id", c.ID)
		return s.current(ctx, c.ID)
	}
	if err == nil && applied {
		countTransition(c.To, c.Source)
	}
	return reply, err
}

// FinishKey ends a key's ownership in tx according to the attempt's status: a
// final status stores the response; otherwise the key is released so that it
// can be resumed. The caller holds the key row (Hold).
func FinishKey(ctx context.Context, tx db.DBTX, lock idempotency.Lock, a attempts.Attempt) (Reply, error) {
	reply, err := replyFor(a)
	if err != nil {
		return Reply{}, err
	}
	if a.Status.Final() {
		_, err = idempotency.Complete(ctx, tx, lock, reply.Code, reply.Body)
	} else {
		_, err = idempotency.Release(ctx, tx, lock)
	}
	return reply, err
}

// current answers the attempt as committed, storing nothing.
func (s *Service) current(ctx context.Context, id string) (Reply, error) {
	a, err := attempts.Get(ctx, s.pool, id)
	if err != nil {
		return Reply{}, err
	}
	return replyFor(a)
}

func replyFor(a attempts.Attempt) (Reply, error) {
	body, err := json.Marshal(a.Public())
	if err != nil {
		return Reply{}, err
	}
	return Reply{Code: StatusCode(a.Status), Body: body, PaymentID: a.ID}, nil
}

// conflicts reports whether a report c contradicts the final attempt a.
func conflicts(a attempts.Attempt, c attempts.Change) bool {
	if a.Status != c.To {
		return true
	}
	return c.ChargeID != "" && a.ProviderChargeID != nil && *a.ProviderChargeID != c.ChargeID
}

func conflictAnomaly(a attempts.Attempt, c attempts.Change) attempts.Anomaly {
	return attempts.Anomaly{
		Kind: "conflicting_report", AttemptID: a.ID, ChargeID: c.ChargeID, Source: c.Source,
		Detail:    map[string]any{"status": a.Status, "reported": c.To, "reason": c.Reason},
		DedupeKey: fmt.Sprintf("conflict:%s:%s:%s:%s", c.Source, a.ID, c.To, c.ChargeID),
	}
}
