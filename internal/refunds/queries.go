package refunds

import (
	"context"
	"errors"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// ErrNotFound is a refund that does not exist (or is another tenant's).
var ErrNotFound = errors.New("refund not found")

// translate maps a query's error to this package's: no row is ErrNotFound;
// the rest as db.Translate maps them.
func translate(err error) error {
	err = db.Translate(err)
	if errors.Is(err, db.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Get returns a refund by id.
func Get(ctx context.Context, q db.DBTX, id string) (Refund, error) {
	row, err := db.Q.RefundGetByID(ctx, q, id)
	if err != nil {
		return Refund{}, translate(err)
	}
	return fromRow(row), nil
}

// GetForTenant returns tenantID's refund id; another tenant's is ErrNotFound.
func GetForTenant(ctx context.Context, q db.DBTX, tenantID, id string) (Refund, error) {
	row, err := db.Q.RefundGetForTenant(ctx, q, db.RefundGetForTenantParams{TenantID: tenantID, ID: id})
	if err != nil {
		return Refund{}, translate(err)
	}
	return fromRow(row), nil
}

// GetByProviderRefundID returns the refund that recorded the provider's refund.
func GetByProviderRefundID(ctx context.Context, q db.DBTX, providerRefundID string) (Refund, error) {
	row, err := db.Q.RefundGetByProviderRefundID(ctx, q, &providerRefundID)
	if err != nil {
		return Refund{}, translate(err)
	}
	return fromRow(row), nil
}

// Touch marks that the provider is about to be asked again to refund an
// unresolved refund (the reconciler's not-found window starts over).
func Touch(ctx context.Context, q db.DBTX, id string) error {
	return translate(db.Q.RefundTouch(ctx, q, id))
}

// QuietFor reports whether refund id has not changed for at least d, by the
// database clock.
func QuietFor(ctx context.Context, q db.DBTX, id string, d time.Duration) (bool, error) {
	quiet, err := db.Q.RefundQuietFor(ctx, q, db.RefundQuietForParams{ID: id, QuietMs: d.Milliseconds()})
	if err != nil {
		return false, translate(err)
	}
	return quiet, nil
}

// History returns the refund's audit trail as the sequence of statuses it took.
func History(ctx context.Context, q db.DBTX, id string) ([]lifecycle.Status, error) {
	rows, err := db.Q.RefundEventList(ctx, q, id)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]lifecycle.Status, len(rows))
	for i, r := range rows {
		out[i] = lifecycle.Status(r.ToStatus)
	}
	return out, nil
}

// List returns one page of payment paymentID's refunds, newest first: at
// most limit, after the refund after when it is set; and whether more follow.
func List(ctx context.Context, q db.DBTX, paymentID string, after *Refund, limit int) ([]Refund, bool, error) {
	p := db.RefundListPageParams{PaymentID: paymentID, MaxRows: int32(limit + 1)}
	if after != nil {
		p.HasCursor, p.AfterCreatedAt, p.AfterID = true, after.CreatedAt, after.ID
	}
	rows, err := db.Q.RefundListPage(ctx, q, p)
	if err != nil {
		return nil, false, translate(err)
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	out := make([]Refund, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, more, nil
}

// UnresolvedOfPayment returns the ids of payment paymentID's refunds that
// are PENDING or UNKNOWN: those a provider's word about the charge may
// resolve.
func UnresolvedOfPayment(ctx context.Context, q db.DBTX, paymentID string) ([]string, error) {
	ids, err := db.Q.RefundListUnresolvedByPayment(ctx, q, paymentID)
	return ids, translate(err)
}
