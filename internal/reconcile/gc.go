package reconcile

import (
	"context"
	"fmt"

	"github.com/acme/paymentsvc/internal/idempotency"
)

// GC deletes the idempotency keys past their expiry whose attempt is final,
// GCBatchSize keys per statement (each its own short transaction, so no lock
// is held long and vacuum keeps up), until a statement deletes fewer than
// that. It returns how many keys it deleted, also when it fails midway.
func (r *Reconciler) GC(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := idempotency.DeleteExpired(ctx, r.pool, r.cfg.GCBatchSize)
		total += n
		if err != nil {
			return total, fmt.Errorf("delete expired keys: %w", err)
		}
		if n < r.cfg.GCBatchSize {
			r.log.Info("expired idempotency keys deleted", "deleted", total)
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
