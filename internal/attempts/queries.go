package attempts

import (
	"context"
	"errors"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// ErrNotFound is returned for an attempt that does not exist (or belongs to
// another tenant).
var ErrNotFound = errors.New("payment not found")

// translate maps a query's error to this package's: no row is ErrNotFound;
// the rest as db.Translate maps them. It is the one place that does.
func translate(err error) error {
	err = db.Translate(err)
	if errors.Is(err, db.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Get returns an attempt by id.
func Get(ctx context.Context, q db.DBTX, id string) (Attempt, error) {
	row, err := db.Q.AttemptGetByID(ctx, q, id)
	if err != nil {
		return Attempt{}, translate(err)
	}
	return fromRow(row), nil
}

// GetForTenant returns tenantID's attempt id; another tenant's is ErrNotFound.
func GetForTenant(ctx context.Context, q db.DBTX, tenantID, id string) (Attempt, error) {
	row, err := db.Q.AttemptGetForTenant(ctx, q, db.AttemptGetForTenantParams{TenantID: tenantID, ID: id})
	if err != nil {
		return Attempt{}, translate(err)
	}
	return fromRow(row), nil
}

// GetByChargeID returns the attempt that recorded the provider charge.
func GetByChargeID(ctx context.Context, q db.DBTX, chargeID string) (Attempt, error) {
	row, err := db.Q.AttemptGetByChargeID(ctx, q, &chargeID)
	if err != nil {
		return Attempt{}, translate(err)
	}
	return fromRow(row), nil
}

// LiveForOrder returns the order's attempt that is not FAILED, if any.
func LiveForOrder(ctx context.Context, q db.DBTX, tenantID, orderID string) (Attempt, error) {
	row, err := db.Q.AttemptGetLiveForOrder(ctx, q, db.AttemptGetLiveForOrderParams{TenantID: tenantID, OrderID: orderID})
	if err != nil {
		return Attempt{}, translate(err)
	}
	return fromRow(row), nil
}

// ListByOrder returns every attempt of an order, oldest first.
func ListByOrder(ctx context.Context, q db.DBTX, tenantID, orderID string) ([]Attempt, error) {
	rows, err := db.Q.AttemptListByOrder(ctx, q, db.AttemptListByOrderParams{TenantID: tenantID, OrderID: orderID})
	if err != nil {
		return nil, err
	}
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Touch marks that the provider is about to be called again for an
// unresolved attempt (the reconciler measures "no call can still land" from it).
func Touch(ctx context.Context, q db.DBTX, id string) error {
	return db.Q.AttemptTouch(ctx, q, id)
}

// History returns the attempt's audit trail as the sequence of statuses it took.
func History(ctx context.Context, q db.DBTX, id string) ([]Status, error) {
	rows, err := db.Q.AttemptEventList(ctx, q, id)
	if err != nil {
		return nil, err
	}
	out := make([]Status, len(rows))
	for i, r := range rows {
		out[i] = Status(r.ToStatus)
	}
	return out, nil
}

// QuietFor reports whether attempt id has not changed for at least d, by the
// database clock.
func QuietFor(ctx context.Context, q db.DBTX, id string, d time.Duration) (bool, error) {
	quiet, err := db.Q.AttemptQuietFor(ctx, q, db.AttemptQuietForParams{ID: id, QuietMs: d.Milliseconds()})
	if err != nil {
		return false, translate(err)
	}
	return quiet, nil
}

// ListQuery asks for a page of a tenant's payments, newest first: at most
// Limit of them, only OrderID's when it is set, after the payment After
// (found with GetForTenant) when it is set.
type ListQuery struct {
	TenantID string
	OrderID  string
	After    *Attempt
	Limit    int
}

// List returns one page of payments and whether more follow.
func List(ctx context.Context, q db.DBTX, lq ListQuery) ([]Attempt, bool, error) {
	p := db.AttemptListPageParams{TenantID: lq.TenantID, MaxRows: int32(lq.Limit + 1)}
	if lq.OrderID != "" {
		p.OrderID = &lq.OrderID
	}
	if lq.After != nil {
		p.HasCursor, p.AfterCreatedAt, p.AfterID = true, lq.After.CreatedAt, lq.After.ID
	}
	rows, err := db.Q.AttemptListPage(ctx, q, p)
	if err != nil {
		return nil, false, translate(err)
	}
	more := len(rows) > lq.Limit
	if more {
		rows = rows[:lq.Limit]
	}
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, more, nil
}

// Lock returns attempt id and holds its row lock until tx ends, so that
// nothing else changes it meanwhile (the row lock every Update takes).
func Lock(ctx context.Context, tx db.DBTX, id string) (Attempt, error) {
	row, err := db.Q.AttemptGetForUpdate(ctx, tx, id)
	if err != nil {
		return Attempt{}, translate(err)
	}
	return fromRow(row), nil
}

// LockForTenant is Lock for tenantID's payment id: another tenant's is
// ErrNotFound.
func LockForTenant(ctx context.Context, tx db.DBTX, tenantID, id string) (Attempt, error) {
	row, err := db.Q.AttemptGetForTenantForUpdate(ctx, tx, db.AttemptGetForTenantForUpdateParams{TenantID: tenantID, ID: id})
	if err != nil {
		return Attempt{}, translate(err)
	}
	return fromRow(row), nil
}
