package outbox

import (
	"context"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// DeletePublishedBefore deletes the rows published more than age ago, judged
// by the database clock, batch rows per statement, and returns how many it
// deleted (also when it fails midway). An unpublished row is never deleted,
// however old (reconciler gc: OUTBOX_RETENTION).
func DeletePublishedBefore(ctx context.Context, q db.DBTX, age time.Duration, batch int) (int, error) {
	return db.DeleteOlderInBatches(ctx, age, batch, "outbox: DeletePublishedBefore", "delete published outbox rows",
		func(ctx context.Context, ageMs int64, limit int32) (int64, error) {
			return db.Q.OutboxDeletePublishedBefore(ctx, q, db.OutboxDeletePublishedBeforeParams{
				AgeMs: ageMs, MaxRows: limit,
			})
		})
}
