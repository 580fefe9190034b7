package idempotency

import (
	"context"
	"fmt"

	"github.com/acme/paymentsvc/internal/db"
)

// DeleteExpired deletes the keys past their expiry whose payment or refund
// is final, batch per statement (each its own short transaction), and
// returns how many it deleted, also when it fails midway. A key of an
// unresolved one is kept however old: a retry with it must resume it, not
// start anew. Keys a request holds right now are passed over: locked
// (locked_until not yet past, as during its provider call), or row-locked by
// a running transaction.
func DeleteExpired(ctx context.Context, q db.DBTX, batch int) (int, error) {
	n, err := db.DeleteInBatches(ctx, batch, func(ctx context.Context, limit int32) (int64, error) {
		return db.Q.IdemKeyDeleteExpired(ctx, q, limit)
	})
	if err != nil {
		return n, fmt.Errorf("delete expired keys: %w", db.Translate(err))
	}
	return n, nil
}
