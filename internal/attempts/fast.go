package attempts

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/outbox"
)

// The create path's transactions, each one round trip: their statements are
// queued into a db.Pipeline that also carries the other tables' statements
// of the same transaction, and their results are read after it is sent.
// Anything they cannot decide alone (the key was taken over, a webhook
// moved the attempt first) leaves no write behind, and the caller takes the
// transaction-per-step path (Update, Transition) instead.

// Queued is the result of a queued statement, valid once the pipeline is sent.
type Queued struct {
	Attempt Attempt
	OK      bool // the statement inserted or moved the attempt
	// Event: with the move, an event was queued for the outbox, which
	// sends no NOTIFY; once it committed, the caller wakes its relay
	// (outbox.Wakeup).
	Event bool
}

// QueueInsertCalling queues the insert of n's attempt directly in PENDING at
// provider, with the audit rows CREATED and PENDING, for the key this same
// pipeline inserts with attempt id n.ID. The order guard may refuse it: the
// pipeline then fails with db.ErrConflict and nothing is kept.
func QueueInsertCalling(p *db.Pipeline, n New, provider string) *Queued {
	var meta json.RawMessage
	if n.Metadata != nil {
		meta, _ = json.Marshal(n.Metadata) // a map of strings always marshals
	}
	q := &Queued{}
	arg := db.AttemptInsertCallingParams{
		ID: n.ID, TenantID: n.TenantID, OrderID: n.OrderID, IdempotencyKey: n.IdempotencyKey,
		Amount: n.Amount, Currency: n.Currency, PaymentMethod: n.PaymentMethod,
		Description: n.Description, Metadata: meta, Provider: provider, Route: append([]string{}, n.Route...),
		CaptureMethod: n.captureMethod(),
	}
	p.Add(func(ctx context.Context, tx db.DBTX) error {
		row, err := db.Q.AttemptInsertCalling(ctx, tx, arg)
		return q.take(db.PaymentAttempt(row), err)
	})
	return q
}

// expected is how transition c will leave attempt a, but for updated_at,
// which the transaction sets (as AttemptTransition and AttemptFinish do).
func expected(a Attempt, c Change) Attempt {
	a.Status = c.To
	if c.ChargeID != "" {
		a.ProviderChargeID = &c.ChargeID
	}
	if c.FailureCode != "" {
		a.FailureCode = &c.FailureCode
	}
	switch c.To {
	case Succeeded:
		a.AmountCaptured = a.Amount
		if c.AmountCaptured > 0 {
			a.AmountCaptured = c.AmountCaptured
		}
	case Authorized:
		a.CaptureBefore = c.CaptureBefore
	}
	if c.To != Authorized {
		a.CaptureBefore = nil
	}
	return a
}

// StampedPayment is the payment as clients see it once c has moved a (with
// its tenant, as events carry it, if withTenant), its updated_at left for
// the transaction to stamp (db.Stamped).
func StampedPayment(a Attempt, c Change, withTenant bool) (db.Stamped, error) {
	pub := expected(a, c).Public()
	if withTenant {
		pub.TenantID = a.TenantID
	}
	pub.UpdatedAt = time.Time{}
	b, err := json.Marshal(pub)
	if err != nil {
		return db.Stamped{}, err
	}
	return db.StampAt(b, "updated_at")
}

// QueueFinish queues the transition of a from its status to c.To, only while
// the request still holds its key (owner lock: tenant, key, token), with its
// audit row, and its event if c.To has one (with ctx's traceparent, and no
// NOTIFY: see Queued.Event): the transition's one round trip. Queued.OK is false when nothing moved (the key
// was taken over, or another path moved the attempt first); then nothing
// else is written.
func QueueFinish(ctx context.Context, p *db.Pipeline, a Attempt, c Change, tenantID, key string, token int64) (*Queued, error) {
	typ := eventType(c.To)
	var event db.Stamped
	if typ != "" {
		var err error
		if event, err = StampedPayment(a, c, true); err != nil {
			return nil, err
		}
	}
	q := &Queued{}
	arg := db.AttemptFinishParams{
		ID: a.ID, FromStatus: string(a.Status), ToStatus: string(c.To),
		ProviderChargeID: nonEmpty(c.ChargeID), FailureCode: nonEmpty(c.FailureCode),
		AmountCaptured: positive(c.AmountCaptured), CaptureBefore: c.CaptureBefore,
		TenantID: tenantID, Key: key, LockToken: token, Reason: c.Reason,
	}
	p.Add(func(ctx context.Context, tx db.DBTX) error {
		row, err := db.Q.AttemptFinish(ctx, tx, arg)
		return q.take(db.PaymentAttempt(row), err)
	})
	if typ == "" {
		return q, nil
	}
	q.Event = true
	ev := outbox.Event{Type: typ, SubjectID: a.ID, PaymentID: a.ID}
	return q, outbox.QueueEnqueueMoved(ctx, p, ev, event, string(c.To))
}

// take keeps a queued statement's row; no row is not an error.
func (q *Queued) take(row db.PaymentAttempt, err error) error {
	if errors.Is(db.Translate(err), db.ErrNotFound) { // Translate keeps an ErrNotFound as it is
		return nil
	}
	if err != nil {
		return err
	}
	q.Attempt, q.OK = fromRow(row), true
	return nil
}
