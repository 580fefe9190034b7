package attempts

import (
	"context"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// The reconciler's bookkeeping on unresolved attempts (see
// db/queries/attempts_schedule.sql): which are due for a check, when to check
// again, and which a human must look at.

// Claim is an unresolved attempt a reconciler holds the lease of.
type Claim = lifecycle.Claim

// ClaimDue takes up to max unresolved attempts unchanged for at least minAge
// and due for a check, and pushes their next check out by lease, so that no
// other reconciler claims them meanwhile.
func ClaimDue(ctx context.Context, q db.DBTX, minAge time.Duration, max int, lease time.Duration) ([]Claim, error) {
	rows, err := db.Q.AttemptClaimDue(ctx, q, db.AttemptClaimDueParams{
		MinAgeMs: minAge.Milliseconds(), MaxRows: int32(max), LeaseMs: lease.Milliseconds(),
	})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Claim, len(rows))
	for i, r := range rows {
		out[i] = Claim{ID: r.ID, Status: Status(r.Status), CheckCount: int(r.CheckCount), NeedsReview: r.NeedsReview}
	}
	return out, nil
}

// ScheduleNextCheck records a check that left attempt id unresolved: its
// check count is now checks, the next check is after delay, and review flags
// it for a human (never cleared here). It reports false when the attempt was
// resolved meanwhile, in which case nothing is recorded.
func ScheduleNextCheck(ctx context.Context, q db.DBTX, id string, checks int, delay time.Duration, review bool) (bool, error) {
	n, err := db.Q.AttemptScheduleNextCheck(ctx, q, db.AttemptScheduleNextCheckParams{
		ID: id, CheckCount: int32(checks), DelayMs: delay.Milliseconds(), NeedsReview: review,
	})
	return n == 1, translate(err)
}

// ReleaseClaims hands claimed attempts back without counting a check: they
// are due again after delay.
func ReleaseClaims(ctx context.Context, q db.DBTX, ids []string, delay time.Duration) error {
	_, err := db.Q.AttemptReleaseClaims(ctx, q, db.AttemptReleaseClaimsParams{Ids: ids, DelayMs: delay.Milliseconds()})
	return translate(err)
}

// ClaimExpired takes up to max AUTHORIZED payments whose capture_before has
// passed, that no capture or void (other than a FAILED one) holds and that
// are due for a check, and pushes their next check out by lease, like
// ClaimDue. It returns their ids.
func ClaimExpired(ctx context.Context, q db.DBTX, max int, lease time.Duration) ([]string, error) {
	ids, err := db.Q.AttemptClaimExpired(ctx, q, db.AttemptClaimExpiredParams{MaxRows: int32(max), LeaseMs: lease.Milliseconds()})
	return ids, translate(err)
}
