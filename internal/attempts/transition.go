package attempts

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/outbox"
)

// The outbox events a payment's transitions write: on SUCCEEDED, FAILED,
// AUTHORIZED and CANCELED, each once per payment.
const (
	EventPaymentSucceeded  = outbox.TypePaymentSucceeded
	EventPaymentFailed     = outbox.TypePaymentFailed
	EventPaymentAuthorized = outbox.TypePaymentAuthorized
	EventPaymentCanceled   = outbox.TypePaymentCanceled
)

// Change asks for a transition of attempt ID to To.
type Change struct {
	ID          string
	To          Status
	Provider    string // for PENDING: the provider about to be called
	ChargeID    string // provider charge id, when known
	FailureCode string // for FAILED
	// AmountCaptured, for SUCCEEDED, is what was charged; 0 means the
	// amount (an automatic payment, or a capture of all that was held).
	AmountCaptured int64
	// CaptureBefore, for AUTHORIZED, is the provider's deadline, if known.
	CaptureBefore *time.Time
	// CanceledReason, for CANCELED: the void's reason, expired,
	// voided_at_provider, or "" for a void without one.
	CanceledReason string
	// Unexpected says the provider captured (SUCCEEDED) or voided
	// (CANCELED) a manual payment without a capture or void of ours: the
	// move also records an anomaly (AnomalyUnexpectedCapture or
	// AnomalyUnexpectedVoid).
	Unexpected bool
	Source     Source
	Reason     string
}

// Anomalies of a manual payment moved by the provider alone.
const (
	AnomalyUnexpectedCapture = "unexpected_capture"
	AnomalyUnexpectedVoid    = "unexpected_void"
)

// Decide looks at an attempt as it is under its row lock and says which
// change to apply to it; false applies nothing.
type Decide func(a Attempt) (Change, bool)

// Update is the one way an attempt changes status. In the caller's
// transaction it locks attempt id, asks decide what to do with the attempt as
// it is now, and applies the change decide returns if it is an edge from the
// current status (on the payment's machine, Attempt.Machine): conditional
// update, audit row, and the event of the status it moves to, if it has one
// (eventType). It returns the attempt as it is afterwards and
// whether this call moved it. Two paths racing on one attempt serialise on
// the row lock, so the second decides on what the first committed.
func Update(ctx context.Context, tx db.DBTX, id string, decide Decide) (Attempt, bool, error) {
	row, err := db.Q.AttemptGetForUpdate(ctx, tx, id)
	if err != nil {
		return Attempt{}, false, translate(err)
	}
	a := fromRow(row)
	c, ok := decide(a)
	if !ok || !a.Machine().CanTransition(a.Status, c.To) {
		return a, false, nil
	}
	c.ID = id
	row, err = db.Q.AttemptTransition(ctx, tx, db.AttemptTransitionParams{
		ID: id, FromStatus: string(a.Status), ToStatus: string(c.To), Provider: nonEmpty(c.Provider),
		ProviderChargeID: nonEmpty(c.ChargeID), FailureCode: nonEmpty(c.FailureCode),
		AmountCaptured: positive(c.AmountCaptured), CaptureBefore: c.CaptureBefore, CanceledReason: nonEmpty(c.CanceledReason),
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
	if eventType(a.Status) != "" {
		if err := enqueueEvent(ctx, tx, a); err != nil {
			return Attempt{}, false, err
		}
	}
	if c.Unexpected {
		if err := recordUnexpected(ctx, tx, a, c); err != nil {
			return Attempt{}, false, err
		}
	}
	return a, true, nil
}

// recordUnexpected records that the provider moved manual payment a (as c
// says) without a capture or void of ours, once per payment and kind.
func recordUnexpected(ctx context.Context, tx db.DBTX, a Attempt, c Change) error {
	kind := AnomalyUnexpectedCapture
	if a.Status == Canceled {
		kind = AnomalyUnexpectedVoid
	}
	return RecordAnomaly(ctx, tx, Anomaly{
		Kind: kind, AttemptID: a.ID, ChargeID: deref(a.ProviderChargeID), Source: c.Source,
		Detail:    map[string]any{"status": a.Status, "amount_captured": a.AmountCaptured, "reason": c.Reason},
		DedupeKey: kind + ":" + a.ID,
	})
}

// Transition applies c if it is an edge from the attempt's current status
// (Update with a decision made in advance). A change that is not an edge
// (the attempt is already there, or final) applies nothing.
func Transition(ctx context.Context, tx db.DBTX, c Change) (Attempt, bool, error) {
	return Update(ctx, tx, c.ID, func(Attempt) (Change, bool) { return c, true })
}

// enqueueEvent writes the event of a payment that moved to its status: its
// data is the payment as clients see it, with its tenant.
func enqueueEvent(ctx context.Context, tx db.DBTX, a Attempt) error {
	p := a.Public()
	p.TenantID = a.TenantID
	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = outbox.Enqueue(ctx, tx, outbox.Event{Type: eventType(a.Status), SubjectID: a.ID, PaymentID: a.ID, Payload: payload})
	return err
}

// eventType is the event of a payment that moved to status s ("" for none).
func eventType(s Status) string {
	switch s {
	case Succeeded:
		return EventPaymentSucceeded
	case Failed:
		return EventPaymentFailed
	case Authorized:
		return EventPaymentAuthorized
	case Canceled:
		return EventPaymentCanceled
	}
	return ""
}

func positive(n int64) *int64 {
	if n <= 0 {
		return nil
	}
	return &n
}
