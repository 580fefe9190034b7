package idempotency

import (
	"context"
	"errors"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// Hold locks the key row in tx and reports whether l still owns it (same
// token, no final response). Call it first in a completing transaction: the
// row lock keeps the key as checked until commit.
func Hold(ctx context.Context, tx db.DBTX, l Lock) (bool, error) {
	_, err := db.Q.IdemKeyLockOwned(ctx, tx, db.IdemKeyLockOwnedParams{TenantID: l.TenantID, Key: l.Key, LockToken: l.Token})
	if err = db.Translate(err); errors.Is(err, db.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Renew extends l's lock to ttl from now (the database's clock), so that a
// provider call starting now cannot outlive it; false if l no longer owns the
// key. It locks the key row like Hold.
func Renew(ctx context.Context, tx db.DBTX, l Lock, ttl time.Duration) (bool, error) {
	n, err := db.Q.IdemKeyRenew(ctx, tx, db.IdemKeyRenewParams{
		TenantID: l.TenantID, Key: l.Key, LockToken: l.Token, LockTtlMs: ttl.Milliseconds(),
	})
	return n == 1, db.Translate(err)
}

// Complete stores the final response under l and unlocks the key; false if
// l no longer owns it. The key expires l's key TTL from now (keyTTLms).
func Complete(ctx context.Context, tx db.DBTX, l Lock, code int, body []byte) (bool, error) {
	n, err := db.Q.IdemKeyComplete(ctx, tx, db.IdemKeyCompleteParams{
		TenantID: l.TenantID, Key: l.Key, LockToken: l.Token, ResponseCode: ptr(int32(code)), ResponseBody: body,
		KeyTtlMs: l.keyTTLms(),
	})
	return n == 1, err
}

// Release unlocks the key without a final response, so that the next
// request with it resumes the attempt; false if l no longer owns it.
func Release(ctx context.Context, q db.DBTX, l Lock) (bool, error) {
	n, err := db.Q.IdemKeyRelease(ctx, q, db.IdemKeyReleaseParams{
		TenantID: l.TenantID, Key: l.Key, LockToken: l.Token, KeyTtlMs: l.keyTTLms(),
	})
	return n == 1, err
}

func ptr[T any](v T) *T { return &v }
