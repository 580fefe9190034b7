package attempts

import (
	"context"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// The reads of the daily settlement (reconciler settle).

// Settled is what settlement compares of an attempt with a provider charge.
type Settled struct {
	ID             string
	Status         Status
	Provider       string // "" when none was chosen
	ChargeID       string // "" when none recorded
	Amount         int64
	AmountCaptured int64 // what it charged, once SUCCEEDED
	Currency       string
	CreatedAt      time.Time
}

// ListForSettlement returns the attempts among ids (missing ones are absent).
func ListForSettlement(ctx context.Context, q db.DBTX, ids []string) ([]Settled, error) {
	rows, err := db.Q.AttemptListForSettle(ctx, q, ids)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Settled, len(rows))
	for i, r := range rows {
		out[i] = Settled{
			ID: r.ID, Status: Status(r.Status), Provider: deref(r.Provider), ChargeID: deref(r.ProviderChargeID),
			Amount: r.Amount, AmountCaptured: r.AmountCaptured, Currency: r.Currency,
		}
	}
	return out, nil
}

// ListSucceededCreatedBetween pages through the SUCCEEDED attempts created in
// [from, to), oldest first: up to max of them after the one (afterCreatedAt,
// afterID) (from minus a microsecond and "" to start).
func ListSucceededCreatedBetween(ctx context.Context, q db.DBTX, from, to, afterCreatedAt time.Time, afterID string, max int) ([]Settled, error) {
	rows, err := db.Q.AttemptListSucceededCreatedBetween(ctx, q, db.AttemptListSucceededCreatedBetweenParams{
		FromTime: from, ToTime: to, AfterCreatedAt: afterCreatedAt, AfterID: afterID, MaxRows: int32(max),
	})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Settled, len(rows))
	for i, r := range rows {
		out[i] = Settled{
			ID: r.ID, Status: Succeeded, Provider: deref(r.Provider), ChargeID: deref(r.ProviderChargeID),
			Amount: r.Amount, AmountCaptured: r.AmountCaptured, Currency: r.Currency, CreatedAt: r.CreatedAt,
		}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
