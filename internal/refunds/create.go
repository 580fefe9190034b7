package refunds

import (
	"context"
	"encoding/json"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// New describes a refund to create.
type New struct {
	ID             string
	TenantID       string
	PaymentID      string
	IdempotencyKey string
	Amount         *int64 // nil: the payment's whole refundable rest
	Reason         *string
	Metadata       map[string]string
	// Source and AuditReason are those of its first audit row.
	Source      lifecycle.Source
	AuditReason string
}

// Create reserves the refund's amount on its payment and inserts the refund
// in CREATED with its first audit row, all in the caller's transaction (the
// idempotency key's), and returns it with its payment as the reservation
// read it. The reservation may refuse it: attempts.ErrNotFound,
// attempts.ErrNotRefundable or *attempts.ExceedsError, and then nothing is
// kept.
func Create(ctx context.Context, tx db.DBTX, n New) (Refund, attempts.Attempt, error) {
	res, err := attempts.ReserveRefund(ctx, tx, n.TenantID, n.PaymentID, n.Amount)
	if err != nil {
		return Refund{}, attempts.Attempt{}, err
	}
	meta := json.RawMessage(`{}`)
	if len(n.Metadata) > 0 {
		if meta, err = json.Marshal(n.Metadata); err != nil {
			return Refund{}, attempts.Attempt{}, err
		}
	}
	row, err := db.Q.RefundInsert(ctx, tx, db.RefundInsertParams{
		ID: n.ID, TenantID: n.TenantID, PaymentID: n.PaymentID, IdempotencyKey: n.IdempotencyKey,
		Amount: res.Amount, Currency: res.Payment.Currency, Reason: n.Reason, Metadata: meta,
		Provider: res.Payment.ProviderName(),
	})
	if err != nil {
		return Refund{}, attempts.Attempt{}, translate(err)
	}
	err = db.Q.RefundEventInsert(ctx, tx, db.RefundEventInsertParams{
		RefundID: row.ID, ToStatus: string(lifecycle.Created), Source: string(n.Source), Reason: n.AuditReason,
	})
	if err != nil {
		return Refund{}, attempts.Attempt{}, err
	}
	return fromRow(row), res.Payment, nil
}
