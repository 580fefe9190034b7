package db

import "context"

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
