package payments

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/apperr"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/failpoint"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/provider"
)

// CaptureInput is a validated POST /v1/payments/{id}/captures.
type CaptureInput struct {
	OperationRequest
	Amount *int64 // nil: all that is authorized
}

// VoidInput is a validated POST /v1/payments/{id}/voids.
type VoidInput struct {
	OperationRequest
	Reason *string // one of captures.VoidReasons, or nil
}

// Capture runs one POST /v1/payments/{id}/captures: the key protocol and
// the flow of every operation on a payment. A new key inserts the capture
// under the payment's row lock; a refusal there (no such payment, not
// AUTHORIZED or already captured or voided, more than authorized) keeps
// nothing. A capture that succeeds makes its payment SUCCEEDED with the
// amount captured.
func (s *Service) Capture(ctx context.Context, in CaptureInput) (Reply, error) {
	return s.hold(ctx, captures.KindCapture, in.OperationRequest, captures.New{Amount: in.Amount})
}

// Void runs one POST /v1/payments/{id}/voids, like Capture. A void that
// succeeds makes its payment CANCELED with the void's reason.
func (s *Service) Void(ctx context.Context, in VoidInput) (Reply, error) {
	return s.hold(ctx, captures.KindVoid, in.OperationRequest, captures.New{Reason: in.Reason})
}

// hold runs request in of a capture or void (kind ck; n holds its own fields).
func (s *Service) hold(ctx context.Context, ck captures.Kind, in OperationRequest, n captures.New) (Reply, error) {
	var (
		created captures.Capture
		held    attempts.Attempt // created's payment, as Create read it
	)
	n.Kind, n.TenantID, n.PaymentID, n.IdempotencyKey = ck, in.TenantID, in.PaymentID, in.IdempotencyKey
	n.Source, n.Audit = in.source(), in.says("created")
	res, err := idempotency.AcquireForCapture(ctx, s.pool, s.cfg.keys(), n.TenantID, n.IdempotencyKey, in.Fingerprint,
		ck.NewID(), func(ctx context.Context, tx pgx.Tx, id string) error {
			n.ID = id
			var err error
			created, held, err = captures.Create(ctx, tx, n)
			return err
		})
	var exceeds *captures.ExceedsError
	switch {
	case errors.Is(err, attempts.ErrNotFound):
		return Reply{}, apperr.New(apperr.PaymentNotFound, "no payment %q", n.PaymentID)
	case errors.Is(err, captures.ErrNotHeld) && ck == captures.KindVoid:
		return Reply{}, apperr.New(apperr.PaymentNotVoidable, "payment %s is not AUTHORIZED, or already has a capture or void", n.PaymentID)
	case errors.Is(err, captures.ErrNotHeld):
		return Reply{}, apperr.New(apperr.PaymentNotCapturable, "payment %s is not AUTHORIZED, or already has a capture or void", n.PaymentID)
	case errors.As(err, &exceeds):
		return Reply{}, apperr.New(apperr.CaptureExceeds, "the capture exceeds the authorized amount: %d (minor units)", exceeds.Authorized)
	case err != nil:
		return Reply{}, err
	}
	return s.operate(ctx, newHoldsKind(s, ck), res, res.CaptureID, n.PaymentID,
		func() subject { return holdSubject(created, held) }, in.Origin)
}

// SyncCapture is Sync for capture or void id.
func (s *Service) SyncCapture(ctx context.Context, id string, opt SyncOptions) (captures.Capture, SyncOutcome, error) {
	c, err := captures.Get(ctx, s.pool, id)
	if err != nil {
		return captures.Capture{}, 0, err
	}
	sub, outcome, err := s.sync(ctx, newHoldsKind(s, c.Kind), id, opt)
	if got, ok := sub.rec.(captures.Capture); ok {
		c = got
	}
	return c, outcome, err
}

// holdsKind is the flow's kind for a capture or a void (kind) of a held
// authorization.
type holdsKind struct {
	onPayment[captures.Capture]
	s    *Service
	kind captures.Kind
}

var _ kind = holdsKind{}

func newHoldsKind(s *Service, k captures.Kind) holdsKind {
	return holdsKind{s: s, kind: k, onPayment: onPayment[captures.Capture]{
		get: captures.Get, touchRow: captures.Touch, quiet: captures.QuietFor,
		paymentOf: func(c captures.Capture) string { return c.PaymentID }, subjectOf: holdSubject,
	}}
}

func (k holdsKind) name() string { return string(k.kind) }

// holdSubject is capture or void c of payment p as the flow sees it.
func holdSubject(c captures.Capture, p attempts.Attempt) subject {
	return operationOf(c.ID, c.Status, c.Provider, "", p, c)
}

func (k holdsKind) move(ctx context.Context, tx db.DBTX, c change) (subject, bool, error) {
	got, ok, err := captures.Transition(ctx, tx, captures.Change{
		ID: c.id, To: c.to, FailureCode: c.failureCode, Captured: c.captured, Seen: c.seen, Source: c.source, Reason: c.reason,
	})
	if err != nil {
		return subject{}, false, err
	}
	sub, err := k.with(ctx, tx, got)
	return sub, ok, err
}

func (holdsKind) reply(sub subject) (Reply, error) {
	c := sub.rec.(captures.Capture)
	body, err := json.Marshal(c.Public())
	if err != nil {
		return Reply{}, err
	}
	return Reply{Code: StatusCode(c.Status), Body: body, PaymentID: c.PaymentID, OperationID: c.ID}, nil
}

func (k holdsKind) call(ctx context.Context, sub subject, p Provider) provider.Result {
	c := sub.rec.(captures.Capture)
	key := captures.ProviderKey(c.ID)
	if k.kind == captures.KindVoid {
		return p.VoidCharge(ctx, provider.VoidRequest{ChargeID: sub.chargeID, Reference: c.ID, Reason: deref(c.Reason), IdempotencyKey: key})
	}
	return p.CaptureCharge(ctx, provider.CaptureRequest{ChargeID: sub.chargeID, Amount: c.Amount, Reference: c.ID, IdempotencyKey: key})
}

// answered: done is SUCCEEDED (a capture with what the provider captured).
// A refusal is FAILED with the provider's code; after any but
// amount_too_large (which says nothing of the charge) the charge is read
// back and what it shows goes with it (Change.Seen): captured, voided or
// expired elsewhere, so that money that moved never looks held. A charge
// read back as captured (or voided) under this very operation's key means
// it was done after all: SUCCEEDED.
func (k holdsKind) answered(ctx context.Context, sub subject, p Provider, r provider.Result) change {
	if r.Outcome == provider.Succeeded {
		return k.done(*r.Charge)
	}
	c := change{to: lifecycle.Failed, failureCode: r.DeclineCode}
	if r.DeclineCode == provider.CodeAmountTooLarge {
		return c
	}
	ch, err := p.GetCharge(ctx, sub.chargeID)
	if err != nil {
		k.s.log.Warn("reading the charge back after a refused "+k.name()+" failed", "payment_id", sub.paymentID, "code", r.DeclineCode, "err", err)
		if r.DeclineCode == provider.CodeAuthorizationExpired {
			c.seen = &attempts.Change{To: attempts.Canceled, CanceledReason: lifecycle.CanceledExpired}
		}
		return c
	}
	if k.ours(ch, sub.id) {
		return k.done(ch)
	}
	if shown := chargeChange(ch, true); shown.to != lifecycle.Authorized && shown.to != lifecycle.Failed {
		pc := paymentChange(shown)
		pc.Reason = "provider refused " + k.name() + " " + sub.id + " (" + r.DeclineCode + ") and shows the charge " + ch.Status
		c.seen = &pc
	}
	return c
}

// ours reports whether charge ch was captured (or voided, by kind) under
// operation id's own key.
func (k holdsKind) ours(ch provider.Charge, id string) bool {
	key := captures.ProviderKey(id)
	if k.kind == captures.KindVoid {
		return ch.Status == provider.ChargeVoided && ch.VoidKey == key
	}
	return ch.Status == provider.ChargeSucceeded && ch.CaptureKey == key
}

// done is the change of an operation the provider did, to ch.
func (k holdsKind) done(ch provider.Charge) change {
	c := change{to: lifecycle.Succeeded}
	if k.kind == captures.KindCapture {
		c.captured = ch.CapturedAmount()
	}
	return c
}

func (k holdsKind) lookup(ctx context.Context, sub subject) (change, error) {
	p, err := k.s.Provider(sub.provider)
	if err != nil {
		return change{}, err
	}
	find := p.FindCapture
	if k.kind == captures.KindVoid {
		find = p.FindVoid
	}
	h, err := find(ctx, provider.Lookup{
		Key: captures.ProviderKey(sub.id), Reference: sub.id, ChargeID: sub.chargeID, Since: sub.rec.(captures.Capture).CreatedAt,
	})
	if err != nil {
		return change{}, err
	}
	return change{to: lifecycle.Succeeded, captured: h.Amount}, nil
}

func (k holdsKind) takeOver(ctx context.Context, id string) (idempotency.Lock, bool, error) {
	return idempotency.TakeOverForCapture(ctx, k.s.pool, k.s.cfg.keys(), id)
}

func (k holdsKind) failpoints() failpoints {
	if k.kind == captures.KindVoid {
		return failpoints{failpoint.VoidAfterKeyAcquired, failpoint.VoidAfterProviderCall, failpoint.VoidBeforeCompleteCommit}
	}
	return failpoints{failpoint.CaptureAfterKeyAcquired, failpoint.CaptureAfterProviderCall, failpoint.CaptureBeforeCompleteCommit}
}

func (k holdsKind) counted(to lifecycle.Status, src lifecycle.Source) {
	metrics.CaptureTransitions.WithLabelValues(string(k.kind), string(to), string(src)).Inc()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
