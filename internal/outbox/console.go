package outbox

import (
	"context"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// Written is an event as the outbox holds it, for the console's payment page.
type Written struct {
	ID          string
	Type        string
	Subject     string
	SubjectID   string
	CreatedAt   time.Time
	PublishedAt *time.Time // nil while it waits for the relay
	Attempts    int
	LastError   string
}

// OfPayment returns every event written for payment paymentID and its
// refunds, oldest first, with whether each was published.
func OfPayment(ctx context.Context, q db.DBTX, paymentID string) ([]Written, error) {
	rows, err := db.Q.OutboxListByPayment(ctx, q, paymentID)
	if err != nil {
		return nil, db.Translate(err)
	}
	out := make([]Written, len(rows))
	for i, r := range rows {
		w := Written{
			ID: r.ID, Type: r.Type, Subject: r.Subject, SubjectID: r.SubjectID, CreatedAt: r.CreatedAt,
			PublishedAt: r.PublishedAt, Attempts: int(r.PublishAttempts),
		}
		if r.LastError != nil {
			w.LastError = *r.LastError
		}
		out[i] = w
	}
	return out, nil
}
