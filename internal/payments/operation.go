package payments

import (
	"context"
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// An operation on a payment (a refund, a capture, a void) is the flow's
// subject like a payment's charge, with what every operation shares: it is
// created under its payment's row lock in its key's transaction (the
// owner package's Create: the refund's amount reservation, the capture's
// or void's exclusivity), goes to its payment's provider alone, and a
// report that contradicts it is an anomaly of its payment. The kinds
// (refundsKind, holdsKind) supply the rest: their table, their provider
// call and look-up, their reply.

// OperationRequest is what every request of an operation on a payment
// carries besides its own fields: who asks, the payment, and the key.
type OperationRequest struct {
	Origin         // who asks: the tenant API unless set
	TenantID       string
	PaymentID      string
	IdempotencyKey string
	Fingerprint    []byte
}

// Operation is r itself, so that code filling in the request of any
// operation reaches it through one method.
func (r *OperationRequest) Operation() *OperationRequest { return r }

// onPayment is the part of a kind that every operation shares: how its
// owner package reads and touches it (R is its record), and whose payment
// it is.
type onPayment[R any] struct {
	get       func(ctx context.Context, q db.DBTX, id string) (R, error)
	touchRow  func(ctx context.Context, q db.DBTX, id string) error
	quiet     func(ctx context.Context, q db.DBTX, id string, d time.Duration) (bool, error)
	paymentOf func(R) string
	// subjectOf is record r of payment p as the flow sees it.
	subjectOf func(r R, p attempts.Attempt) subject
}

func (o onPayment[R]) load(ctx context.Context, q db.DBTX, id string) (subject, error) {
	r, err := o.get(ctx, q, id)
	if err != nil {
		return subject{}, err
	}
	return o.with(ctx, q, r)
}

// with is record r as the flow sees it, with its payment as it is now.
func (o onPayment[R]) with(ctx context.Context, q db.DBTX, r R) (subject, error) {
	p, err := attempts.Get(ctx, q, o.paymentOf(r))
	if err != nil {
		return subject{}, err
	}
	return o.subjectOf(r, p), nil
}

func (o onPayment[R]) touch(ctx context.Context, q db.DBTX, id string) error {
	return o.touchRow(ctx, q, id)
}

func (o onPayment[R]) quietFor(ctx context.Context, q db.DBTX, id string, d time.Duration) (bool, error) {
	return o.quiet(ctx, q, id, d)
}

// candidates: an operation goes to its payment's provider alone.
func (onPayment[R]) candidates(sub subject) []string { return []string{sub.provider} }

// conflict records a report that contradicts final operation sub as an
// anomaly of its payment.
func (onPayment[R]) conflict(ctx context.Context, tx db.DBTX, sub subject, c change) error {
	detail, dedupe := conflictDetail(sub, c)
	detail["operation_id"] = sub.id
	return attempts.RecordAnomaly(ctx, tx, attempts.Anomaly{
		Kind: "conflicting_report", AttemptID: sub.paymentID, ChargeID: sub.chargeID, Source: c.source,
		Detail: detail, DedupeKey: dedupe,
	})
}

// operationOf is operation rec (id, status, provider, its provider id if
// any) of payment p as the flow sees it.
func operationOf(id string, status lifecycle.Status, providerName, providerID string, p attempts.Attempt, rec any) subject {
	sub := subject{id: id, status: status, provider: providerName, providerID: providerID, paymentID: p.ID, rec: rec}
	if p.ProviderChargeID != nil {
		sub.chargeID = *p.ProviderChargeID
	}
	return sub
}

// operate runs a create request of an operation once its key is acquired
// (res): a replay, a key in use or reused is answered as it is; a new key's
// operation (created, as its Create returned it) or a taken-over one (read
// again, by id) is driven from its status.
func (s *Service) operate(ctx context.Context, k kind, res idempotency.Result, id, paymentID string, created func() subject, o Origin) (Reply, error) {
	if reply, done, err := keyAnswer(res, paymentID); done {
		return reply, err
	}
	var sub subject
	if res.Created {
		k.counted(lifecycle.Created, o.source())
		failpoint.Hit(k.failpoints().afterKey)
		sub = created()
	} else {
		// A takeover: resume from the operation's committed status.
		var err error
		if sub, err = k.load(context.WithoutCancel(ctx), s.pool, id); err != nil {
			return Reply{}, err
		}
	}
	return s.drive(ctx, k, res.Lock, sub, nil, o)
}
