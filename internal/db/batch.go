package db

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DeleteInBatches runs deleteBatch, which deletes at most batch rows in one
// statement (its own short transaction, so no lock is held long and vacuum
// keeps up), until a run deletes fewer than batch or ctx ends. It returns
// how many rows were deleted, also when it stops on an error.
func DeleteInBatches(ctx context.Context, batch int, deleteBatch func(ctx context.Context, limit int32) (int64, error)) (int, error) {
	total := 0
	for {
		n, err := deleteBatch(ctx, int32(batch))
		total += int(n)
		if err != nil || n < int64(batch) {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// DeleteOlderInBatches is DeleteInBatches for a statement that deletes the
// rows older than age, judged by the database clock (deleteBatch gets age in
// milliseconds). It refuses a negative age or a batch below 1 with an error
// naming fn, and wraps a failure, translated, with what. The outbox's and
// the webhook events' retention (internal/outbox/retention.go,
// internal/webhook/retention.go) share it; each keeps its own statement.
func DeleteOlderInBatches(ctx context.Context, age time.Duration, batch int, fn, what string,
	deleteBatch func(ctx context.Context, ageMs int64, limit int32) (int64, error)) (int, error) {
	if age < 0 || batch < 1 {
		return 0, errors.New(fn + " needs age >= 0 and batch >= 1")
	}
	n, err := DeleteInBatches(ctx, batch, func(ctx context.Context, limit int32) (int64, error) {
		return deleteBatch(ctx, age.Milliseconds(), limit)
	})
	if err != nil {
		return n, fmt.Errorf("%s: %w", what, Translate(err))
	}
	return n, nil
}
