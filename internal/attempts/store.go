package attempts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
)

// ErrNotFound is returned for an attempt that does not exist (or belongs to
// another tenant).
var ErrNotFound = errors.New("payment not found")

// EventPaymentSucceeded is the outbox event type written on SUCCEEDED.
const EventPaymentSucceeded = "PaymentSucceeded"

// New describes an attempt to create.
type New struct {
	ID             string
	TenantID       string
	OrderID        string
	IdempotencyKey string
	Amount         int64
	Currency       string
	PaymentMethod  string
	Description    *string
	Metadata       map[string]string
}

// Insert creates the attempt in CREATED with its first audit row, in the
// caller's transaction. The order guard may refuse it with db.ErrConflict.
func Insert(ctx context.Context, tx db.DBTX, n New) (Attempt, error) {
	var meta json.RawMessage
	if n.Metadata != nil {
		b, err := json.Marshal(n.Metadata)
		if err != nil {
			return Attempt{}, err
		}
		meta = b
	}
	row, err := db.Q.AttemptInsert(ctx, tx, db.AttemptInsertParams{
		ID: n.ID, TenantID: n.TenantID, OrderID: n.OrderID, IdempotencyKey: n.IdempotencyKey,
		Amount: n.Amount, Currency: n.Currency, PaymentMethod: n.PaymentMethod,
		Description: n.Description, Metadata: meta,
	})
	if err != nil {
		return Attempt{}, db.Translate(err)
	}
	err = db.Q.AttemptEventInsert(ctx, tx, db.AttemptEventInsertParams{
		AttemptID: row.ID, ToStatus: string(Created), Source: string(SourceAPI), Reason: "created",
	})
	if err != nil {
		return Attempt{}, err
	}
	return FromRow(row), nil
}

// Get returns an attempt by id.
func Get(ctx context.Context, q db.DBTX, id string) (Attempt, error) {
	row, err := db.Q.AttemptGetByID(ctx, q, id)
	if err != nil {
		return Attempt{}, notFound(err)
	}
	return FromRow(row), nil
}

// GetForTenant returns tenantID's attempt id; another tenant's is ErrNotFound.
func GetForTenant(ctx context.Context, q db.DBTX, tenantID, id string) (Attempt, error) {
	row, err := db.Q.AttemptGetForTenant(ctx, q, db.AttemptGetForTenantParams{TenantID: tenantID, ID: id})
	if err != nil {
		return Attempt{}, notFound(err)
	}
	return FromRow(row), nil
}

// GetByChargeID returns the attempt that recorded the provider charge.
func GetByChargeID(ctx context.Context, q db.DBTX, chargeID string) (Attempt, error) {
	row, err := db.Q.AttemptGetByChargeID(ctx, q, &chargeID)
	if err != nil {
		return Attempt{}, notFound(err)
	}
	return FromRow(row), nil
}

// LiveForOrder returns the order's attempt that is not FAILED, if any.
func LiveForOrder(ctx context.Context, q db.DBTX, tenantID, orderID string) (Attempt, error) {
	row, err := db.Q.AttemptGetLiveForOrder(ctx, q, db.AttemptGetLiveForOrderParams{TenantID: tenantID, OrderID: orderID})
	if err != nil {
		return Attempt{}, notFound(err)
	}
	return FromRow(row), nil
}

// ListByOrder returns every attempt of an order, oldest first.
func ListByOrder(ctx context.Context, q db.DBTX, tenantID, orderID string) ([]Attempt, error) {
	rows, err := db.Q.AttemptListByOrder(ctx, q, db.AttemptListByOrderParams{TenantID: tenantID, OrderID: orderID})
	if err != nil {
		return nil, err
	}
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = FromRow(r)
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

func notFound(err error) error {
	err = db.Translate(err)
	if errors.Is(err, db.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// Change asks for a transition of attempt ID to To.
type Change struct {
	ID          string
	To          Status
	ChargeID    string // provider charge id, when known
	FailureCode string // for FAILED
	Source      Source
	Reason      string
}

// Transition applies c in the caller's transaction if it is an edge from the
// attempt's current status: conditional update, audit row, and for
// SUCCEEDED the PaymentSucceeded outbox row. It returns the attempt as it is
// afterwards and whether this call moved it. A change that is not an edge
// (the attempt is already there, or final) applies nothing.
func Transition(ctx context.Context, tx db.DBTX, c Change) (Attempt, bool, error) {
	row, err := db.Q.AttemptGetForUpdate(ctx, tx, c.ID)
	if err != nil {
		return Attempt{}, false, notFound(err)
	}
	from := Status(row.Status)
	if !CanTransition(from, c.To) {
		return FromRow(row), false, nil
	}
	row, err = db.Q.AttemptTransition(ctx, tx, db.AttemptTransitionParams{
		ID: c.ID, FromStatus: string(from), ToStatus: string(c.To),
		ProviderChargeID: nonEmpty(c.ChargeID), FailureCode: nonEmpty(c.FailureCode),
	})
	if err != nil {
		// The row is locked by us, so losing the update would be a bug.
		return Attempt{}, false, fmt.Errorf("transition %s %s→%s: %w", c.ID, from, c.To, db.Translate(err))
	}
	fromStr := string(from)
	err = db.Q.AttemptEventInsert(ctx, tx, db.AttemptEventInsertParams{
		AttemptID: c.ID, FromStatus: &fromStr, ToStatus: string(c.To), Source: string(c.Source), Reason: c.Reason,
	})
	if err != nil {
		return Attempt{}, false, err
	}
	a := FromRow(row)
	if c.To == Succeeded {
		if err := insertSucceededEvent(ctx, tx, a); err != nil {
			return Attempt{}, false, err
		}
	}
	return a, true, nil
}

func insertSucceededEvent(ctx context.Context, tx db.DBTX, a Attempt) error {
	p := a.Public()
	p.TenantID = a.TenantID
	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	err = db.Q.OutboxInsert(ctx, tx, db.OutboxInsertParams{
		ID: ids.New("evt_", 12), Type: EventPaymentSucceeded, PaymentID: a.ID, Payload: payload,
	})
	if err != nil {
		return err
	}
	// Delivered at commit, so a relay never wakes to a row it cannot see.
	return db.Q.OutboxNotify(ctx, tx)
}

// Anomaly is a report that contradicts what we know, kept for settlement and humans.
type Anomaly struct {
	Kind      string // e.g. conflicting_report, unknown_charge, amount_mismatch
	AttemptID string
	ChargeID  string
	Source    Source
	Detail    any
	DedupeKey string // the same key records the anomaly once
}

// RecordAnomaly writes a in the caller's transaction (once per DedupeKey).
func RecordAnomaly(ctx context.Context, tx db.DBTX, a Anomaly) error {
	detail, err := json.Marshal(a.Detail)
	if err != nil {
		return err
	}
	if a.Detail == nil {
		detail = []byte("{}")
	}
	return db.Q.AnomalyInsert(ctx, tx, db.AnomalyInsertParams{
		Kind: a.Kind, AttemptID: nonEmpty(a.AttemptID), ChargeID: nonEmpty(a.ChargeID),
		Source: string(a.Source), Detail: detail, DedupeKey: nonEmpty(a.DedupeKey),
	})
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// QuietFor reports whether attempt id has not changed for at least d, by the
// database clock.
func QuietFor(ctx context.Context, q db.DBTX, id string, d time.Duration) (bool, error) {
	quiet, err := db.Q.AttemptQuietFor(ctx, q, db.AttemptQuietForParams{ID: id, QuietMs: d.Milliseconds()})
	if err != nil {
		return false, notFound(err)
	}
	return quiet, nil
}
