package attempts

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/outbox"
)

// The outbox events a payment's transitions write: on SUCCEEDED and on FAILED.
const (
	EventPaymentSucceeded = outbox.TypePaymentSucceeded
	EventPaymentFailed    = outbox.TypePaymentFailed
)

// Change asks for a transition of attempt ID to To.
type Change struct {
	ID          string
	To          Status
	Provider    string // for PENDING: the provider about to be called
	ChargeID    string // provider charge id, when known
	FailureCode string // for FAILED
	Source      Source
	Reason      string
}

// Decide looks at an attempt as it is under its row lock and says which
// change to apply to it; false applies nothing.
type Decide func(a Attempt) (Change, bool)

// Update is the one way an attempt changes status. In the caller's
// transaction it locks attempt id, asks decide what to do with the attempt as
// it is now, and applies the change decide returns if it is an edge from the
// current status: conditional update, audit row, and for SUCCEEDED the
// PaymentSucceeded outbox row. It returns the attempt as it is afterwards and
// whether this call moved it. Two paths racing on one attempt serialise on
// the row lock, so the second decides on what the first committed.
func Update(ctx context.Context, tx db.DBTX, id string, decide Decide) (Attempt, bool, error) {
	row, err := db.Q.AttemptGetForUpdate(ctx, tx, id)
	if err != nil {
		return Attempt{}, false, translate(err)
	}
	a := fromRow(row)
	c, ok := decide(a)
	if !ok || !CanTransition(a.Status, c.To) {
		return a, false, nil
	}
	c.ID = id
	row, err = db.Q.AttemptTransition(ctx, tx, db.AttemptTransitionParams{
		ID: id, FromStatus: string(a.Status), ToStatus: string(c.To), Provider: nonEmpty(c.Provider),
		ProviderChargeID: nonEmpty(c.ChargeID), FailureCode: nonEmpty(c.FailureCode),
	})
	if err != nil {
		// The row is locked by us, so losing the update would be a bug.
		return Attempt{}, false, fmt.Errorf("transition %s %s→%s: %w", id, a.Status, c.To, translate(err))
	}
	from := string(a.Status)
	err = db.Q.AttemptEventInsert(ctx, tx, db.AttemptEventInsertParams{
		AttemptID: id, FromStatus: &from, ToStatus: string(c.To), Source: string(c.Source), Reason: c.Reason,
	})
	if err != nil {
		return Attempt{}, false, err
	}
	a = fromRow(row)
	if c.To.Final() {
		if err := enqueueFinal(ctx, tx, a); err != nil {
			return Attempt{}, false, err
		}
	}
	return a, true, nil
}

// Transition applies c if it is an edge from the attempt's current status
// (Update with a decision made in advance). A change that is not an edge
// (the attempt is already there, or final) applies nothing.
func Transition(ctx context.Context, tx db.DBTX, c Change) (Attempt, bool, error) {
	return Update(ctx, tx, c.ID, func(Attempt) (Change, bool) { return c, true })
}

// enqueueFinal writes the event of a payment that became final: its data is
// the payment as clients see it, with its tenant.
func enqueueFinal(ctx context.Context, tx db.DBTX, a Attempt) error {
	p := a.Public()
	p.TenantID = a.TenantID
	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = outbox.Enqueue(ctx, tx, outbox.Event{Type: eventType(a.Status), SubjectID: a.ID, PaymentID: a.ID, Payload: payload})
	return err
}

// eventType is the event of a payment that became final in status s.
func eventType(s Status) string {
	if s == Failed {
		return EventPaymentFailed
	}
	return EventPaymentSucceeded
}
