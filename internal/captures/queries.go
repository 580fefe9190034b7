package captures

import (
	"context"
	"errors"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// ErrNotFound is a capture or void that does not exist (or is another
// tenant's, or of the other kind).
var ErrNotFound = errors.New("capture or void not found")

// translate maps a query's error to this package's: no row is ErrNotFound;
// the rest as db.Translate maps them.
func translate(err error) error {
	err = db.Translate(err)
	if errors.Is(err, db.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Get returns a capture or void by id.
func Get(ctx context.Context, q db.DBTX, id string) (Capture, error) {
	row, err := db.Q.CaptureGetByID(ctx, q, id)
	if err != nil {
		return Capture{}, translate(err)
	}
	return fromRow(row), nil
}

// GetForTenant returns tenantID's capture (or void: k) id; another
// tenant's, or one of the other kind, is ErrNotFound.
func GetForTenant(ctx context.Context, q db.DBTX, tenantID string, k Kind, id string) (Capture, error) {
	row, err := db.Q.CaptureGetForTenant(ctx, q, db.CaptureGetForTenantParams{TenantID: tenantID, ID: id, Kind: string(k)})
	if err != nil {
		return Capture{}, translate(err)
	}
	return fromRow(row), nil
}

// LiveOf returns payment paymentID's capture or void that is not FAILED
// (there is at most one); ErrNotFound if none.
func LiveOf(ctx context.Context, q db.DBTX, paymentID string) (Capture, error) {
	row, err := db.Q.CaptureGetLiveForPayment(ctx, q, paymentID)
	if err != nil {
		return Capture{}, translate(err)
	}
	return fromRow(row), nil
}

// ListOf returns every capture and void of payment paymentID, oldest first.
func ListOf(ctx context.Context, q db.DBTX, paymentID string) ([]Capture, error) {
	rows, err := db.Q.CaptureListByPayment(ctx, q, paymentID)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]Capture, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Touch marks that the provider is about to be asked again (the
// reconciler's not-found window starts over).
func Touch(ctx context.Context, q db.DBTX, id string) error {
	return translate(db.Q.CaptureTouch(ctx, q, id))
}

// QuietFor reports whether capture or void id has not changed for at least
// d, by the database clock.
func QuietFor(ctx context.Context, q db.DBTX, id string, d time.Duration) (bool, error) {
	quiet, err := db.Q.CaptureQuietFor(ctx, q, db.CaptureQuietForParams{ID: id, QuietMs: d.Milliseconds()})
	if err != nil {
		return false, translate(err)
	}
	return quiet, nil
}

// History returns the audit trail as the sequence of statuses it took.
func History(ctx context.Context, q db.DBTX, id string) ([]lifecycle.Status, error) {
	rows, err := db.Q.CaptureEventList(ctx, q, id)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]lifecycle.Status, len(rows))
	for i, s := range rows {
		out[i] = lifecycle.Status(s)
	}
	return out, nil
}

// TimelineOfPayment returns the audit rows of every capture and void of
// payment paymentID, oldest first (the console's timeline); each names its
// capture or void and the provider it is at.
func TimelineOfPayment(ctx context.Context, q db.DBTX, paymentID string) ([]lifecycle.Audit, error) {
	rows, err := db.Q.CaptureEventListByPayment(ctx, q, paymentID)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]lifecycle.Audit, len(rows))
	for i, r := range rows {
		a := lifecycle.Audit{
			SubjectID: r.CaptureID, To: lifecycle.Status(r.ToStatus), Source: lifecycle.Source(r.Source),
			Reason: r.Reason, Provider: r.Provider, At: r.CreatedAt,
		}
		if r.FromStatus != nil {
			a.From = lifecycle.Status(*r.FromStatus)
		}
		out[i] = a
	}
	return out, nil
}
