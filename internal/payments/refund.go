package payments

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/refunds"
)

// RefundInput is a validated POST /v1/payments/{id}/refunds.
type RefundInput struct {
	OperationRequest
	Amount   *int64 // nil: the payment's whole refundable rest
	Reason   *string
	Metadata map[string]string
}

// Refund runs one POST /v1/payments/{id}/refunds: the same key protocol and
// the same flow as a payment's create. A new key reserves the amount on the
// payment and inserts the refund in its transaction; a refusal there (no
// such payment, not refundable, more than the rest) keeps nothing.
func (s *Service) Refund(ctx context.Context, in RefundInput) (Reply, error) {
	var (
		created refunds.Refund
		paid    attempts.Attempt // created's payment, as its reservation read it
	)
	res, err := idempotency.AcquireForRefund(ctx, s.pool, s.cfg.keys(), in.TenantID, in.IdempotencyKey, in.Fingerprint,
		refunds.NewID(), func(ctx context.Context, tx pgx.Tx, refundID string) error {
			var err error
			created, paid, err = refunds.Create(ctx, tx, refunds.New{
				ID: refundID, TenantID: in.TenantID, PaymentID: in.PaymentID, IdempotencyKey: in.IdempotencyKey,
				Amount: in.Amount, Reason: in.Reason, Metadata: in.Metadata,
				Source: in.source(), Audit: in.says("created"),
			})
			return err
		})
	var exceeds *attempts.ExceedsError
	switch {
	case errors.Is(err, attempts.ErrNotFound):
		return Reply{}, apperr.New(apperr.PaymentNotFound, "no payment %q", in.PaymentID)
	case errors.Is(err, attempts.ErrNotRefundable):
		return Reply{}, apperr.New(apperr.PaymentNotRefundable, "payment %s is not SUCCEEDED; only a SUCCEEDED payment can be refunded", in.PaymentID)
	case errors.As(err, &exceeds):
		return Reply{}, apperr.New(apperr.RefundExceeds, "the refund exceeds what is left to refund of the payment: %d (minor units)", exceeds.Rest)
	case err != nil:
		return Reply{}, err
	}
	return s.operate(ctx, newRefundsKind(s), res, res.RefundID, in.PaymentID,
		func() subject { return refundSubject(created, paid) }, in.Origin)
}

// refundsKind is the flow's kind for a refund.
type refundsKind struct {
	onPayment[refunds.Refund]
	s *Service
}

var _ kind = refundsKind{}

func newRefundsKind(s *Service) refundsKind {
	return refundsKind{s: s, onPayment: onPayment[refunds.Refund]{
		get: refunds.Get, touchRow: refunds.Touch, quiet: refunds.QuietFor,
		paymentOf: func(r refunds.Refund) string { return r.PaymentID }, subjectOf: refundSubject,
	}}
}

func (refundsKind) name() string { return "refund" }

// refundSubject is refund r of payment p as the flow sees it.
func refundSubject(r refunds.Refund, p attempts.Attempt) subject {
	var providerID string
	if r.ProviderRefundID != nil {
		providerID = *r.ProviderRefundID
	}
	return operationOf(r.ID, r.Status, r.Provider, providerID, p, r)
}

func (k refundsKind) move(ctx context.Context, tx db.DBTX, c change) (subject, bool, error) {
	r, ok, err := refunds.Transition(ctx, tx, refunds.Change{
		ID: c.id, To: c.to, ProviderRefundID: c.providerID, FailureCode: c.failureCode, Source: c.source, Reason: c.reason,
	})
	if err != nil {
		return subject{}, false, err
	}
	sub, err := k.with(ctx, tx, r)
	return sub, ok, err
}

func (refundsKind) reply(sub subject) (Reply, error) {
	return refundReply(sub.rec.(refunds.Refund))
}

func refundReply(r refunds.Refund) (Reply, error) {
	body, err := json.Marshal(r.Public())
	if err != nil {
		return Reply{}, err
	}
	return Reply{Code: StatusCode(r.Status), Body: body, PaymentID: r.PaymentID, RefundID: r.ID}, nil
}

func (refundsKind) call(ctx context.Context, sub subject, p Provider) provider.Result {
	r := sub.rec.(refunds.Refund)
	return p.CreateRefund(ctx, provider.RefundRequest{
		ChargeID: sub.chargeID, Amount: r.Amount, Reference: r.ID, Reason: deref(r.Reason), IdempotencyKey: refunds.ProviderKey(r.ID),
	})
}

func (refundsKind) answered(_ context.Context, _ subject, _ Provider, r provider.Result) change {
	if r.Outcome == provider.Declined {
		return change{to: lifecycle.Failed, failureCode: r.DeclineCode}
	}
	return change{to: lifecycle.Succeeded, providerID: r.Refund.ID}
}

func (k refundsKind) lookup(ctx context.Context, sub subject) (change, error) {
	p, err := k.s.Provider(sub.provider)
	if err != nil {
		return change{}, err
	}
	re, err := p.FindRefund(ctx, provider.Lookup{
		Key: refunds.ProviderKey(sub.id), Reference: sub.id, ChargeID: sub.chargeID, Since: sub.rec.(refunds.Refund).CreatedAt,
	})
	if err != nil {
		return change{}, err
	}
	if re.Status != provider.RefundSucceeded {
		return change{to: lifecycle.Failed, providerID: re.ID, failureCode: "provider_refund_failed"}, nil
	}
	return change{to: lifecycle.Succeeded, providerID: re.ID}, nil
}

func (k refundsKind) takeOver(ctx context.Context, id string) (idempotency.Lock, bool, error) {
	return idempotency.TakeOverForRefund(ctx, k.s.pool, k.s.cfg.keys(), id)
}

func (refundsKind) failpoints() failpoints {
	return failpoints{failpoint.RefundAfterKeyAcquired, failpoint.RefundAfterProviderCall, failpoint.RefundBeforeCompleteCommit}
}

func (refundsKind) counted(to lifecycle.Status, src lifecycle.Source) {
	metrics.RefundTransitions.WithLabelValues(string(to), string(src)).Inc()
}
