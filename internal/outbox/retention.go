package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// DeletePublishedBefore deletes the rows published more than age ago, judged
// by the database clock, batch rows per statement, and returns how many it
// deleted (also when it fails midway). An unpublished row is never deleted,
// however old (reconciler gc: OUTBOX_RETENTION).
func DeletePublishedBefore(ctx context.Context, q db.DBTX, age time.Duration, batch int) (int, error) {
	if age < 0 || batch < 1 {
		return 0, errors.New("outbox: DeletePublishedBefore needs age >= 0 and batch >= 1")
	}
	n, err := db.DeleteInBatches(ctx, batch, func(ctx context.Context, limit int32) (int64, error) {
		return db.Q.OutboxDeletePublishedBefore(ctx, q, db.OutboxDeletePublishedBeforeParams{
			AgeMs: age.Milliseconds(), MaxRows: limit,
		})
	})
	if err != nil {
		return n, fmt.Errorf("delete published outbox rows: %w", db.Translate(err))
	}
	return n, nil
}
