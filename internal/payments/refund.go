package payments

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/acme/paymentsvc/internal/refunds"
)

// RefundInput is a validated POST /v1/payments/{id}/refunds.
type RefundInput struct {
	TenantID       string
	PaymentID      string
	IdempotencyKey string
	Fingerprint    []byte
	Amount         *int64 // nil: the payment's whole refundable rest
	Reason         *string
	Metadata       map[string]string
	// Source is the source of the refund's audit rows ("": the API), and
	// Operator the console's operator that their reasons name.
	Source   lifecycle.Source
	Operator string
}

// Refund runs one POST /v1/payments/{id}/refunds: the same key protocol and
// the same flow as a payment's create. A new key reserves the amount on the
// payment and inserts the refund in its transaction; a refusal there (no
// such payment, not refundable, more than the rest) keeps nothing.
func (s *Service) Refund(ctx context.Context, in RefundInput) (Reply, error) {
	by := actorOf(in.Source, in.Operator)
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
				Source: by.source, AuditReason: by.reason("created"),
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
	if reply, done, err := keyAnswer(res, in.PaymentID); done {
		return reply, err
	}
	k := refundsKind{s}
	var sub subject
	if res.Created {
		k.counted(lifecycle.Created, by.source)
		failpoint.Hit(failpoint.RefundAfterKeyAcquired)
		sub = refundSubject(created, paid)
	} else {
		// A takeover: resume from the refund's committed status.
		sub, err = k.load(context.WithoutCancel(ctx), s.pool, res.RefundID)
	}
	if err != nil {
		return Reply{}, err
	}
	return s.drive(ctx, k, by, res.Lock, sub, nil)
}

// refundsKind is the flow's kind for a refund.
type refundsKind struct{ s *Service }

var _ kind = refundsKind{}

// refundRecord is a refund with its payment's charge, which the provider
// is asked to refund.
type refundRecord struct {
	refunds.Refund
	chargeID string
}

func (refundsKind) name() string { return "refund" }

func (refundsKind) subjectOf(ctx context.Context, q db.DBTX, r refunds.Refund) (subject, error) {
	p, err := attempts.Get(ctx, q, r.PaymentID)
	if err != nil {
		return subject{}, err
	}
	return refundSubject(r, p), nil
}

// refundSubject is refund r of payment p as the flow sees it.
func refundSubject(r refunds.Refund, p attempts.Attempt) subject {
	rec := refundRecord{Refund: r}
	if p.ProviderChargeID != nil {
		rec.chargeID = *p.ProviderChargeID
	}
	sub := subject{id: r.ID, status: r.Status, provider: r.Provider, rec: rec}
	if r.ProviderRefundID != nil {
		sub.providerID = *r.ProviderRefundID
	}
	return sub
}

func (k refundsKind) load(ctx context.Context, q db.DBTX, id string) (subject, error) {
	r, err := refunds.Get(ctx, q, id)
	if err != nil {
		return subject{}, err
	}
	return k.subjectOf(ctx, q, r)
}

func (refundsKind) touch(ctx context.Context, q db.DBTX, id string) error {
	return refunds.Touch(ctx, q, id)
}

func (k refundsKind) move(ctx context.Context, tx db.DBTX, c change) (subject, bool, error) {
	r, ok, err := refunds.Transition(ctx, tx, refunds.Change{
		ID: c.id, To: c.to, ProviderRefundID: c.providerID, FailureCode: c.failureCode, Source: c.source, Reason: c.reason,
	})
	if err != nil {
		return subject{}, false, err
	}
	sub, err := k.subjectOf(ctx, tx, r)
	return sub, ok, err
}

func (refundsKind) conflict(ctx context.Context, tx db.DBTX, sub subject, c change) error {
	detail, dedupe := conflictDetail(sub, c)
	detail["refund_id"] = sub.id
	rec := sub.rec.(refundRecord)
	return attempts.RecordAnomaly(ctx, tx, attempts.Anomaly{
		Kind: "conflicting_report", AttemptID: rec.PaymentID, ChargeID: rec.chargeID, Source: c.source,
		Detail: detail, DedupeKey: dedupe,
	})
}

func (refundsKind) reply(sub subject) (Reply, error) {
	return refundReply(sub.rec.(refundRecord).Refund)
}

func refundReply(r refunds.Refund) (Reply, error) {
	body, err := json.Marshal(r.Public())
	if err != nil {
		return Reply{}, err
	}
	return Reply{Code: StatusCode(r.Status), Body: body, PaymentID: r.PaymentID, RefundID: r.ID}, nil
}

// candidates: a refund goes to its payment's provider alone.
func (refundsKind) candidates(sub subject) []string { return []string{sub.provider} }

func (refundsKind) call(ctx context.Context, sub subject, p Provider) provider.Result {
	rec := sub.rec.(refundRecord)
	return p.CreateRefund(ctx, provider.RefundRequest{
		ChargeID: rec.chargeID, Amount: rec.Amount, Reference: rec.ID, IdempotencyKey: refunds.ProviderKey(rec.ID),
	})
}

func (k refundsKind) lookup(ctx context.Context, sub subject) (found, error) {
	p, err := k.s.Provider(sub.provider)
	if err != nil {
		return found{}, err
	}
	re, err := p.RefundByKey(ctx, refunds.ProviderKey(sub.id))
	if err != nil {
		return found{}, err
	}
	return found{providerID: re.ID, succeeded: re.Status == provider.RefundSucceeded, failureCode: "provider_refund_failed"}, nil
}

func (refundsKind) quietFor(ctx context.Context, q db.DBTX, id string, d time.Duration) (bool, error) {
	return refunds.QuietFor(ctx, q, id, d)
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
