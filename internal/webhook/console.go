package webhook

import (
	"context"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// Received is a provider webhook as recorded, for the console's payment page.
type Received struct {
	Provider   string
	EventID    string
	Type       string
	ChargeID   string
	Outcome    string
	ReceivedAt time.Time
}

// ReceivedFor returns every webhook recorded for payment paymentID, oldest first.
func ReceivedFor(ctx context.Context, q db.DBTX, paymentID string) ([]Received, error) {
	rows, err := db.Q.WebhookEventListByAttempt(ctx, q, &paymentID)
	if err != nil {
		return nil, db.Translate(err)
	}
	out := make([]Received, len(rows))
	for i, r := range rows {
		out[i] = Received{Provider: r.Provider, EventID: r.EventID, Type: r.Type, Outcome: r.Outcome, ReceivedAt: r.ReceivedAt}
		if r.ChargeID != nil {
			out[i].ChargeID = *r.ChargeID
		}
	}
	return out, nil
}
