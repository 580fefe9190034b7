package webhook

import (
	"context"
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
	return db.DeleteOlderInBatches(ctx, age, batch, "webhook: DeleteReceivedBefore", "delete old webhook events",
		func(ctx context.Context, ageMs int64, limit int32) (int64, error) {
			return db.Q.WebhookEventDeleteReceivedBefore(ctx, q, db.WebhookEventDeleteReceivedBeforeParams{
				AgeMs: ageMs, MaxRows: limit,
			})
		})
}
