package captures

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// ErrNotHeld is a capture or void of a payment that is not AUTHORIZED, or
// that already has a capture or void that is not FAILED.
var ErrNotHeld = errors.New("payment is not AUTHORIZED, or already has a capture or void")

// ExceedsError is a capture of more than the payment holds.
type ExceedsError struct{ Authorized int64 }

func (e *ExceedsError) Error() string {
	return fmt.Sprintf("capture exceeds the authorized amount of %d", e.Authorized)
}

// New describes a capture or void to create.
type New struct {
	ID             string
	Kind           Kind
	TenantID       string
	PaymentID      string
	IdempotencyKey string
	Amount         *int64  // a capture's; nil: all that is held
	Reason         *string // a void's, optional
	// Source and Audit are the source and reason of its first audit row
	// (api and "created" when empty).
	Source lifecycle.Source
	Audit  string
}

// Create inserts the capture or void in CREATED with its first audit row,
// in the caller's transaction (the idempotency key's), holding the
// payment's row lock until it ends, and returns it with its payment as it
// read it. It refuses, keeping nothing: attempts.ErrNotFound (no such
// payment of the tenant), ErrNotHeld (the payment is not AUTHORIZED or
// already has a capture or void that is not FAILED), *ExceedsError (more
// than authorized). Captures and voids racing on one payment serialise on
// its row; the unique index on the payment's live capture or void backs
// the check.
func Create(ctx context.Context, tx db.DBTX, n New) (Capture, attempts.Attempt, error) {
	p, err := attempts.LockForTenant(ctx, tx, n.TenantID, n.PaymentID)
	if err != nil {
		return Capture{}, attempts.Attempt{}, err
	}
	if p.Status != attempts.Authorized {
		return Capture{}, p, ErrNotHeld
	}
	switch _, err := LiveOf(ctx, tx, p.ID); {
	case err == nil:
		return Capture{}, p, ErrNotHeld
	case !errors.Is(err, ErrNotFound):
		return Capture{}, p, err
	}
	var amount *int64
	if n.Kind == KindCapture {
		want := p.Capturable()
		if n.Amount != nil {
			want = *n.Amount
		}
		if want <= 0 || want > p.Capturable() {
			return Capture{}, p, &ExceedsError{Authorized: p.Capturable()}
		}
		amount = &want
	}
	row, err := db.Q.CaptureInsert(ctx, tx, db.CaptureInsertParams{
		ID: n.ID, Kind: string(n.Kind), TenantID: n.TenantID, PaymentID: p.ID, IdempotencyKey: n.IdempotencyKey,
		Amount: amount, Currency: p.Currency, Reason: n.Reason, Provider: p.ProviderName(),
	})
	if err = translate(err); errors.Is(err, db.ErrConflict) {
		// We hold the payment's row lock and found none: a bug if it happens.
		return Capture{}, p, fmt.Errorf("%w (refused by the unique index)", ErrNotHeld)
	} else if err != nil {
		return Capture{}, p, err
	}
	err = db.Q.CaptureEventInsert(ctx, tx, db.CaptureEventInsertParams{
		CaptureID: row.ID, ToStatus: string(lifecycle.Created), Source: string(cmp.Or(n.Source, lifecycle.SourceAPI)), Reason: cmp.Or(n.Audit, "created"),
	})
	if err != nil {
		return Capture{}, p, err
	}
	return fromRow(row), p, nil
}
