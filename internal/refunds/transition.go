package refunds

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/outbox"
)

// Change asks for a transition of refund ID to To.
type Change struct {
	ID               string
	To               lifecycle.Status
	ProviderRefundID string // the provider's refund id, when known
	FailureCode      string // for FAILED
	Source           lifecycle.Source
	Reason           string
}

// Decide looks at a refund as it is under its row lock and says which change
// to apply to it; false applies nothing.
type Decide func(r Refund) (Change, bool)

// Update is the one way a refund changes status (see attempts.Update): in
// the caller's transaction it locks refund id, asks decide, and applies the
// change if it is an edge from the current status, with its audit row. A
// refund that becomes SUCCEEDED counts as refunded on its payment and writes
// PaymentRefunded; one that becomes FAILED releases its reservation and
// writes PaymentRefundFailed.
func Update(ctx context.Context, tx db.DBTX, id string, decide Decide) (Refund, bool, error) {
	row, err := db.Q.RefundGetForUpdate(ctx, tx, id)
	if err != nil {
		return Refund{}, false, translate(err)
	}
	r := fromRow(row)
	c, ok := decide(r)
	if !ok || !lifecycle.CanTransition(r.Status, c.To) {
		return r, false, nil
	}
	row, err = db.Q.RefundTransition(ctx, tx, db.RefundTransitionParams{
		ID: id, FromStatus: string(r.Status), ToStatus: string(c.To),
		ProviderRefundID: nonEmpty(c.ProviderRefundID), FailureCode: nonEmpty(c.FailureCode),
	})
	if err != nil {
		return Refund{}, false, fmt.Errorf("transition %s %s→%s: %w", id, r.Status, c.To, translate(err))
	}
	from := string(r.Status)
	err = db.Q.RefundEventInsert(ctx, tx, db.RefundEventInsertParams{
		RefundID: id, FromStatus: &from, ToStatus: string(c.To), Source: string(c.Source), Reason: c.Reason,
	})
	if err != nil {
		return Refund{}, false, err
	}
	r = fromRow(row)
	if err := settleAmount(ctx, tx, r); err != nil {
		return Refund{}, false, err
	}
	return r, true, nil
}

// Transition applies c if it is an edge from the refund's current status.
func Transition(ctx context.Context, tx db.DBTX, c Change) (Refund, bool, error) {
	return Update(ctx, tx, c.ID, func(Refund) (Change, bool) { return c, true })
}

// settleAmount moves the payment's amounts for a refund that became final,
// and writes its event: the refund with its tenant and the payment's
// amount_refunded afterwards.
func settleAmount(ctx context.Context, tx db.DBTX, r Refund) error {
	var (
		typ      string
		refunded int64
		err      error
	)
	switch r.Status {
	case lifecycle.Succeeded:
		if refunded, err = attempts.AddRefunded(ctx, tx, r.PaymentID, r.Amount); err != nil {
			return err
		}
		typ = outbox.TypePaymentRefunded
	case lifecycle.Failed:
		if refunded, err = attempts.ReleaseRefund(ctx, tx, r.PaymentID, r.Amount); err != nil {
			return err
		}
		typ = outbox.TypePaymentRefundFailed
	default:
		return nil
	}
	payload, err := json.Marshal(struct {
		View
		AmountRefunded int64 `json:"amount_refunded"`
	}{withTenant(r), refunded})
	if err != nil {
		return err
	}
	_, err = outbox.Enqueue(ctx, tx, outbox.Event{Type: typ, SubjectID: r.ID, PaymentID: r.PaymentID, Payload: payload})
	return err
}

func withTenant(r Refund) View {
	v := r.Public()
	v.TenantID = r.TenantID
	return v
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
