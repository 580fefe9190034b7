package attempts

import (
	"context"
	"encoding/json"

	"github.com/acme/paymentsvc/internal/db"
)

// New describes an attempt to create.
type New struct {
	ID             string
	TenantID       string
	OrderID        string
	IdempotencyKey string
	Amount         int64
	Currency       string
	PaymentMethod  string
	Description    *string
	Metadata       map[string]string
	// Route is the providers the payment may go to, in order (the tenant's
	// rule for its currency, else the default order), fixed at creation.
	Route []string
	// CaptureMethod is CaptureAutomatic (also when empty) or CaptureManual.
	CaptureMethod string
}

// captureMethod is n's capture method, automatic if unset.
func (n New) captureMethod() string {
	if n.CaptureMethod == CaptureManual {
		return CaptureManual
	}
	return CaptureAutomatic
}

// Insert creates the attempt in CREATED with its first audit row, in the
// caller's transaction. The order guard may refuse it with db.ErrConflict.
func Insert(ctx context.Context, tx db.DBTX, n New) (Attempt, error) {
	var meta json.RawMessage
	if n.Metadata != nil {
		b, err := json.Marshal(n.Metadata)
		if err != nil {
			return Attempt{}, err
		}
		meta = b
	}
	row, err := db.Q.AttemptInsert(ctx, tx, db.AttemptInsertParams{
		ID: n.ID, TenantID: n.TenantID, OrderID: n.OrderID, IdempotencyKey: n.IdempotencyKey,
		Amount: n.Amount, Currency: n.Currency, PaymentMethod: n.PaymentMethod,
		Description: n.Description, Metadata: meta, Route: append([]string{}, n.Route...),
		CaptureMethod: n.captureMethod(),
	})
	if err != nil {
		return Attempt{}, translate(err)
	}
	err = db.Q.AttemptEventInsert(ctx, tx, db.AttemptEventInsertParams{
		AttemptID: row.ID, ToStatus: string(Created), Source: string(SourceAPI), Reason: "created",
	})
	if err != nil {
		return Attempt{}, err
	}
	return fromRow(row), nil
}
