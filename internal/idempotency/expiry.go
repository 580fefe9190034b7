package idempotency

import (
	"context"

	"github.com/acme/paymentsvc/internal/db"
)

// DeleteExpired deletes up to max keys past their expiry whose attempt is
// final, and returns how many it deleted. A key of an unresolved attempt is
// kept however old: a retry with it must resume that attempt, not start a
// new one. Keys a request holds right now are passed over.
func DeleteExpired(ctx context.Context, q db.DBTX, max int) (int, error) {
	n, err := db.Q.IdemKeyDeleteExpired(ctx, q, int32(max))
	return int(n), db.Translate(err)
}
