package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// DeleteReceivedBefore deletes the events received more than age ago, judged
// by the database clock, batch rows per statement, and returns how many it
// deleted (also when it fails midway). Forgetting an event forgets only its
// id: a redelivery after that is applied again, which changes nothing, so
// age should exceed the provider's redelivery window (reconciler gc:
// WEBHOOK_EVENT_TTL).
func DeleteReceivedBefore(ctx context.Context, q db.DBTX, age time.Duration, batch int) (int, error) {
	if age < 0 || batch < 1 {
		return 0, errors.New("webhook: DeleteReceivedBefore needs age >= 0 and batch >= 1")
	}
	n, err := db.DeleteInBatches(ctx, batch, func(ctx context.Context, limit int32) (int64, error) {
		return db.Q.WebhookEventDeleteReceivedBefore(ctx, q, db.WebhookEventDeleteReceivedBeforeParams{
			AgeMs: age.Milliseconds(), MaxRows: limit,
		})
	})
	if err != nil {
		return n, fmt.Errorf("delete old webhook events: %w", db.Translate(err))
	}
	return n, nil
}
