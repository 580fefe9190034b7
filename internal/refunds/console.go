package refunds

import (
	"context"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// The console's reads of a payment's refunds (internal/console).

// MaxOfPayment bounds the refunds OfPayment returns.
const MaxOfPayment = 500

// OfPayment returns payment paymentID's refunds, oldest first (at most
// MaxOfPayment).
func OfPayment(ctx context.Context, q db.DBTX, paymentID string) ([]Refund, error) {
	rows, err := db.Q.RefundListByPayment(ctx, q, db.RefundListByPaymentParams{PaymentID: paymentID, MaxRows: MaxOfPayment})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Refund, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// TimelineOfPayment returns the audit rows of every refund of payment
// paymentID, oldest first; each names the refund's provider.
func TimelineOfPayment(ctx context.Context, q db.DBTX, paymentID string, refunds []Refund) ([]lifecycle.Audit, error) {
	rows, err := db.Q.RefundEventListByPayment(ctx, q, paymentID)
	if err != nil {
		return nil, translate(err)
	}
	provider := make(map[string]string, len(refunds))
	for _, r := range refunds {
		provider[r.ID] = r.Provider
	}
	out := make([]lifecycle.Audit, len(rows))
	for i, r := range rows {
		a := lifecycle.Audit{
			SubjectID: r.RefundID, To: lifecycle.Status(r.ToStatus), Source: lifecycle.Source(r.Source),
			Reason: r.Reason, Provider: provider[r.RefundID], At: r.CreatedAt,
		}
		if r.FromStatus != nil {
			a.From = lifecycle.Status(*r.FromStatus)
		}
		out[i] = a
	}
	return out, nil
}
