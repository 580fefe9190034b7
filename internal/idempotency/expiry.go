package idempotency

import (
	"context"
	"fmt"
	"time"

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

// ResolvedAttempt starts the expiry of the key of payment attemptID, whose
// create's answer became final (SUCCEEDED, FAILED, AUTHORIZED or CANCELED)
// in q's transaction without its key (a webhook): the key is
// kept keyTTL from now (zero: DefaultKeyTTL), like a key whose answer is
// stored now. A key a request holds right now is left to that request,
// whose complete or release starts the expiry then.
func ResolvedAttempt(ctx context.Context, q db.DBTX, attemptID string, keyTTL time.Duration) error {
	return resolved(ctx, q, ref{attemptID: attemptID}, keyTTL)
}

// ResolvedRefund is ResolvedAttempt for the key of refund refundID.
func ResolvedRefund(ctx context.Context, q db.DBTX, refundID string, keyTTL time.Duration) error {
	return resolved(ctx, q, ref{refundID: refundID}, keyTTL)
}

// ResolvedCapture is ResolvedAttempt for the key of capture or void captureID.
func ResolvedCapture(ctx context.Context, q db.DBTX, captureID string, keyTTL time.Duration) error {
	return resolved(ctx, q, ref{captureID: captureID}, keyTTL)
}

func resolved(ctx context.Context, q db.DBTX, r ref, keyTTL time.Duration) error {
	_, err := db.Q.IdemKeyResolved(ctx, q, db.IdemKeyResolvedParams{
		AttemptID: nonEmpty(r.attemptID), RefundID: nonEmpty(r.refundID), CaptureID: nonEmpty(r.captureID),
		KeyTtlMs: Lock{keyTTL: keyTTL}.keyTTLms(),
	})
	return err
}
