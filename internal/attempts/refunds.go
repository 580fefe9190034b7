package attempts

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/db"
)

// The refund amounts of a payment. internal/refunds calls these in the
// transactions that create, fail and succeed its refunds; the payment's row
// is the guard that keeps refunds, however concurrent, within its amount.

// ErrNotRefundable is a refund of a payment that is not SUCCEEDED.
var ErrNotRefundable = errors.New("payment is not refundable")

// ExceedsError is a refund of more than the payment's refundable rest.
type ExceedsError struct{ Rest int64 }

func (e *ExceedsError) Error() string {
	return fmt.Sprintf("refund exceeds the refundable rest of %d", e.Rest)
}

// Reservation is what a refund reserved of its payment.
type Reservation struct {
	Payment Attempt // as it was before the reservation
	Amount  int64
}

// ReserveRefund reserves amount (nil: the whole refundable rest) of
// tenantID's payment paymentID for a refund, in the caller's transaction,
// holding the payment's row lock until it ends: ErrNotFound (no such payment
// of the tenant), ErrNotRefundable (not SUCCEEDED), or *ExceedsError (more
// than the rest, or the rest is 0). Two refunds racing on one payment, on any
// number of pods, serialise on the row: the second sees the first's
// reservation.
func ReserveRefund(ctx context.Context, tx db.DBTX, tenantID, paymentID string, amount *int64) (Reservation, error) {
	a, err := LockForTenant(ctx, tx, tenantID, paymentID)
	if err != nil {
		return Reservation{}, err
	}
	if a.Status != Succeeded {
		return Reservation{}, ErrNotRefundable
	}
	rest := a.Refundable()
	want := rest
	if amount != nil {
		want = *amount
	}
	if want <= 0 || want > rest {
		return Reservation{}, &ExceedsError{Rest: rest}
	}
	n, err := db.Q.AttemptReserveRefund(ctx, tx, db.AttemptReserveRefundParams{ID: a.ID, Amount: want})
	if err != nil {
		return Reservation{}, translate(err)
	}
	if n != 1 {
		// We hold the row lock and checked the rest: a bug if it happens.
		return Reservation{}, fmt.Errorf("reserve %d of %s: the guard refused it", want, a.ID)
	}
	return Reservation{Payment: a, Amount: want}, nil
}

// ReleaseRefund gives back the reservation of a refund that FAILED and
// returns the payment's amount_refunded (unchanged by it).
func ReleaseRefund(ctx context.Context, tx db.DBTX, paymentID string, amount int64) (int64, error) {
	refunded, err := db.Q.AttemptReleaseRefund(ctx, tx, db.AttemptReleaseRefundParams{ID: paymentID, Amount: amount})
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("release %d of %s: less is reserved", amount, paymentID)
	}
	if err != nil {
		return 0, translate(err)
	}
	return refunded, nil
}

// AddRefunded counts the amount of a refund that SUCCEEDED as refunded and
// returns the payment's amount_refunded afterwards.
func AddRefunded(ctx context.Context, tx db.DBTX, paymentID string, amount int64) (int64, error) {
	refunded, err := db.Q.AttemptAddRefunded(ctx, tx, db.AttemptAddRefundedParams{ID: paymentID, Amount: amount})
	if errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("refunded %d of %s: more than is reserved", amount, paymentID)
	}
	if err != nil {
		return 0, translate(err)
	}
	return refunded, nil
}
