package payments

import (
	"context"
	"encoding/json"
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/provider"
)

// charges is the flow's kind for a payment: its attempt, and the charge.
type charges struct{ s *Service }

var _ kind = charges{}

func (charges) name() string { return "payment" }

func paymentSubject(a attempts.Attempt) subject {
	sub := subject{id: a.ID, status: a.Status, provider: a.ProviderName(), rec: a}
	if a.ProviderChargeID != nil {
		sub.providerID = *a.ProviderChargeID
	}
	return sub
}

func (charges) load(ctx context.Context, q db.DBTX, id string) (subject, error) {
	a, err := attempts.Get(ctx, q, id)
	if err != nil {
		return subject{}, err
	}
	return paymentSubject(a), nil
}

func (charges) touch(ctx context.Context, q db.DBTX, id string) error {
	return attempts.Touch(ctx, q, id)
}

func (charges) move(ctx context.Context, tx db.DBTX, c change) (subject, bool, error) {
	a, ok, err := attempts.Transition(ctx, tx, paymentChange(c))
	if err != nil {
		return subject{}, false, err
	}
	return paymentSubject(a), ok, nil
}

// paymentChange is c as a change of a payment's attempt.
func paymentChange(c change) attempts.Change {
	return attempts.Change{
		ID: c.id, To: c.to, Provider: c.provider, ChargeID: c.providerID, FailureCode: c.failureCode,
		AmountCaptured: c.captured, CaptureBefore: c.captureBefore, CanceledReason: c.canceledReason,
		Unexpected: c.unexpected, Source: c.source, Reason: c.reason,
	}
}

func (charges) conflict(ctx context.Context, tx db.DBTX, sub subject, c change) error {
	detail, dedupe := conflictDetail(sub, c)
	return attempts.RecordAnomaly(ctx, tx, attempts.Anomaly{
		Kind: "conflicting_report", AttemptID: sub.id, ChargeID: c.providerID, Source: c.source,
		Detail: detail, DedupeKey: dedupe,
	})
}

func (charges) reply(sub subject) (Reply, error) {
	return replyFor(sub.rec.(attempts.Attempt))
}

func replyFor(a attempts.Attempt) (Reply, error) {
	body, err := json.Marshal(a.Public())
	if err != nil {
		return Reply{}, err
	}
	return Reply{Code: StatusCode(a.Status), Body: body, PaymentID: a.ID}, nil
}

// candidates: a payment that never reached a provider goes along its route
// (fixed at creation; the default order for payments older than routes);
// one that may have reached its provider stays there.
func (k charges) candidates(sub subject) []string {
	if sub.status != attempts.Created {
		return []string{k.s.pinned(sub)}
	}
	if route := sub.rec.(attempts.Attempt).Route; len(route) > 0 {
		return route
	}
	return k.s.ProviderNames()
}

func (charges) call(ctx context.Context, sub subject, p Provider) provider.Result {
	a := sub.rec.(attempts.Attempt)
	return p.CreateCharge(ctx, provider.ChargeRequest{
		Amount: a.Amount, Currency: a.Currency, PaymentMethod: a.PaymentMethod,
		Reference: a.ID, IdempotencyKey: attempts.ProviderKey(a.ID), Manual: a.Manual(),
	})
}

func (charges) answered(_ context.Context, sub subject, _ Provider, r provider.Result) change {
	if r.Outcome == provider.Declined {
		c := change{to: lifecycle.Failed, failureCode: r.DeclineCode}
		if r.Charge != nil {
			c.providerID = r.Charge.ID
		}
		return c
	}
	return chargeChange(*r.Charge, sub.rec.(attempts.Attempt).Manual())
}

func (k charges) lookup(ctx context.Context, sub subject) (change, error) {
	p, err := k.s.Provider(k.s.pinned(sub))
	if err != nil {
		return change{}, err
	}
	a := sub.rec.(attempts.Attempt)
	ch, err := p.FindCharge(ctx, provider.Lookup{
		Key: attempts.ProviderKey(sub.id), Reference: sub.id, ChargeID: sub.providerID, Since: a.CreatedAt,
	})
	if err != nil {
		return change{}, err
	}
	return chargeChange(ch, a.Manual()), nil
}

// chargeChange is what the provider's charge ch, as it is now, makes of its
// payment (manual: only authorized at first): succeeded → SUCCEEDED with
// what it captured, failed → FAILED, authorized → AUTHORIZED until its
// capture_before, voided or expired → CANCELED. A manual payment captured
// or voided at the provider is so without a capture or void of ours
// (unexpected) when nothing of ours holds it: the caller, who knows, clears
// it otherwise.
func chargeChange(ch provider.Charge, manual bool) change {
	c := change{providerID: ch.ID}
	switch ch.Status {
	case provider.ChargeSucceeded:
		c.to, c.captured, c.unexpected = lifecycle.Succeeded, ch.CapturedAmount(), manual
	case provider.ChargeAuthorized:
		c.to = lifecycle.Authorized
		if ch.CaptureBefore > 0 {
			t := time.Unix(ch.CaptureBefore, 0).UTC()
			c.captureBefore = &t
		}
	case provider.ChargeVoided:
		c.to, c.canceledReason, c.unexpected = lifecycle.Canceled, lifecycle.CanceledAtProvider, manual
	case provider.ChargeExpired:
		c.to, c.canceledReason = lifecycle.Canceled, lifecycle.CanceledExpired
	default:
		c.to, c.failureCode = lifecycle.Failed, ch.FailureCode
	}
	return c
}

func (charges) quietFor(ctx context.Context, q db.DBTX, id string, d time.Duration) (bool, error) {
	return attempts.QuietFor(ctx, q, id, d)
}

func (k charges) takeOver(ctx context.Context, id string) (idempotency.Lock, bool, error) {
	return idempotency.TakeOverForAttempt(ctx, k.s.pool, k.s.cfg.keys(), id)
}

func (charges) failpoints() failpoints {
	return failpoints{failpoint.AfterKeyAcquired, failpoint.AfterProviderCall, failpoint.BeforeCompleteCommit}
}

// counted counts a committed transition. It is called after the commit, so
// a rolled-back transaction is never counted; the webhook handler counts its
// own transitions the same way.
func (charges) counted(to lifecycle.Status, src lifecycle.Source) {
	metrics.AttemptTransitions.WithLabelValues(string(to), string(src)).Inc()
}

// FinishKey ends a key's ownership in tx according to the attempt's status:
// a final status stores the response; otherwise the key is released so that
// it can be resumed. The caller holds the key row (idempotency.Hold).
func FinishKey(ctx context.Context, tx db.DBTX, lock idempotency.Lock, a attempts.Attempt) (Reply, error) {
	return finishKey(ctx, tx, charges{}, lock, paymentSubject(a))
}
