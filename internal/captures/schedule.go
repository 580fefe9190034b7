package captures

import (
	"context"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// The reconciler's bookkeeping on unresolved captures and voids; see
// internal/attempts/schedule.go, which does the same for payments.

// ClaimDue takes up to max unresolved captures (or voids: k) unchanged for
// at least minAge and due for a check, and pushes their next check out by
// lease.
func ClaimDue(ctx context.Context, q db.DBTX, k Kind, minAge time.Duration, max int, lease time.Duration) ([]lifecycle.Claim, error) {
	rows, err := db.Q.CaptureClaimDue(ctx, q, db.CaptureClaimDueParams{
		Kind: string(k), MinAgeMs: minAge.Milliseconds(), MaxRows: int32(max), LeaseMs: lease.Milliseconds(),
	})
	return lifecycle.ClaimsOf(rows, func(r db.CaptureClaimDueRow) lifecycle.Claim {
		return lifecycle.Claim{ID: r.ID, Status: lifecycle.Status(r.Status), CheckCount: int(r.CheckCount), NeedsReview: r.NeedsReview}
	}), translate(err)
}

// ScheduleNextCheck records a check that left capture or void id
// unresolved; false when it was resolved meanwhile.
func ScheduleNextCheck(ctx context.Context, q db.DBTX, id string, checks int, delay time.Duration, review bool) (bool, error) {
	arg := db.CaptureScheduleNextCheckParams{ID: id, CheckCount: int32(checks), DelayMs: delay.Milliseconds(), NeedsReview: review}
	n, err := db.Q.CaptureScheduleNextCheck(ctx, q, arg)
	return n == 1, translate(err)
}

// ReleaseClaims hands claimed captures or voids back without counting a check.
func ReleaseClaims(ctx context.Context, q db.DBTX, ids []string, delay time.Duration) error {
	_, err := db.Q.CaptureReleaseClaims(ctx, q, db.CaptureReleaseClaimsParams{Ids: ids, DelayMs: delay.Milliseconds()})
	return translate(err)
}
