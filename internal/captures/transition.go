package captures

import (
	"context"
	"fmt"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
)

// Change asks for a transition of capture or void ID to To.
type Change struct {
	ID          string
	To          lifecycle.Status
	FailureCode string // for FAILED
	// Captured, for a capture becoming SUCCEEDED, is what the provider
	// says it captured; 0: the capture's amount.
	Captured int64
	// Seen, for FAILED, is what the provider showed of the payment's charge
	// after the refusal (captured, voided or expired elsewhere, with
	// Unexpected for the first two), applied to the payment in the same
	// transaction; nil leaves it AUTHORIZED.
	Seen   *attempts.Change
	Source lifecycle.Source
	Reason string
}

// Decide looks at a capture or void as it is under its row lock and says
// which change to apply to it; false applies nothing.
type Decide func(c Capture) (Change, bool)

// Update is the one way a capture or void changes status (see
// attempts.Update): in the caller's transaction it locks it, asks decide,
// and applies the change if it is an edge of an operation's machine, with
// its audit row, and then what the change does to the payment (see the
// package comment). It returns it as it is afterwards and whether this
// call moved it.
func Update(ctx context.Context, tx db.DBTX, id string, decide Decide) (Capture, bool, error) {
	row, err := db.Q.CaptureGetForUpdate(ctx, tx, id)
	if err != nil {
		return Capture{}, false, translate(err)
	}
	c := fromRow(row)
	ch, ok := decide(c)
	if !ok || !lifecycle.CanTransition(c.Status, ch.To) {
		return c, false, nil
	}
	row, err = db.Q.CaptureTransition(ctx, tx, db.CaptureTransitionParams{
		ID: id, FromStatus: string(c.Status), ToStatus: string(ch.To), FailureCode: nonEmpty(ch.FailureCode),
	})
	if err != nil {
		return Capture{}, false, fmt.Errorf("transition %s %s→%s: %w", id, c.Status, ch.To, translate(err))
	}
	from := string(c.Status)
	err = db.Q.CaptureEventInsert(ctx, tx, db.CaptureEventInsertParams{
		CaptureID: id, FromStatus: &from, ToStatus: string(ch.To), Source: string(ch.Source), Reason: ch.Reason,
	})
	if err != nil {
		return Capture{}, false, err
	}
	c = fromRow(row)
	if err := settlePayment(ctx, tx, c, ch); err != nil {
		return Capture{}, false, err
	}
	return c, true, nil
}

// Transition applies ch if it is an edge from the current status.
func Transition(ctx context.Context, tx db.DBTX, ch Change) (Capture, bool, error) {
	return Update(ctx, tx, ch.ID, func(Capture) (Change, bool) { return ch, true })
}

// settlePayment moves the payment of c, which has just moved as ch asked.
func settlePayment(ctx context.Context, tx db.DBTX, c Capture, ch Change) error {
	var pc attempts.Change
	switch {
	case c.Status == lifecycle.Succeeded && c.Kind == KindCapture:
		pc = attempts.Change{To: attempts.Succeeded, AmountCaptured: c.Amount}
		if ch.Captured > 0 {
			pc.AmountCaptured = ch.Captured
		}
	case c.Status == lifecycle.Succeeded:
		pc = attempts.Change{To: attempts.Canceled, CanceledReason: deref(c.Reason)}
	case c.Status == lifecycle.Failed && ch.Seen != nil:
		pc = *ch.Seen
	default:
		return nil
	}
	pc.ID, pc.Source = c.PaymentID, ch.Source
	if pc.Reason == "" {
		// What moved the operation (who asked included) moved the payment.
		pc.Reason = fmt.Sprintf("%s %s %s: %s", c.Kind, c.ID, c.Status, ch.Reason)
	}
	p, moved, err := attempts.Transition(ctx, tx, pc)
	if err != nil {
		return err
	}
	if !moved && p.Status != pc.To {
		// The payment moved on without it (cannot happen while the capture
		// or void holds it): a human looks.
		return attempts.RecordAnomaly(ctx, tx, attempts.Anomaly{
			Kind: "conflicting_report", AttemptID: p.ID, Source: ch.Source,
			Detail:    map[string]any{"status": p.Status, "reported": pc.To, c.Kind.String() + "_id": c.ID, "reason": pc.Reason},
			DedupeKey: "conflict:" + c.ID + ":" + string(pc.To),
		})
	}
	return nil
}

// String is the kind's name.
func (k Kind) String() string { return string(k) }

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
