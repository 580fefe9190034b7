package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
	"github.com/acme/paymentsvc/internal/tracing"
)

// The events of the stream: their CloudEvents types, and the subject each is
// published on. Each is enqueued at most once per payment or refund.
const (
	TypePaymentSucceeded    = "PaymentSucceeded"    // a payment became SUCCEEDED
	TypePaymentFailed       = "PaymentFailed"       // a payment became FAILED
	TypePaymentRefunded     = "PaymentRefunded"     // a refund became SUCCEEDED
	TypePaymentRefundFailed = "PaymentRefundFailed" // a refund became FAILED
	TypePaymentAuthorized   = "PaymentAuthorized"   // a payment became AUTHORIZED
	TypePaymentCanceled     = "PaymentCanceled"     // a payment became CANCELED
)

var (
	eventTypes = []string{
		TypePaymentSucceeded, TypePaymentFailed, TypePaymentRefunded, TypePaymentRefundFailed,
		TypePaymentAuthorized, TypePaymentCanceled,
	}
	eventSubjects = map[string]string{
		TypePaymentSucceeded:    "payments.succeeded",
		TypePaymentFailed:       "payments.failed",
		TypePaymentRefunded:     "payments.refunded",
		TypePaymentRefundFailed: "payments.refund_failed",
		TypePaymentAuthorized:   "payments.authorized",
		TypePaymentCanceled:     "payments.canceled",
	}
)

// Subject is the subject events of type typ are published on ("" for a
// type that is not an event of the stream).
func Subject(typ string) string { return eventSubjects[typ] }

// Event is an event to publish: its type (the CloudEvents type), what it is
// once about (SubjectID: the payment, or the refund), the payment it
// concerns, and its data.
type Event struct {
	Type      string
	SubjectID string
	PaymentID string
	Payload   json.RawMessage
}

// Enqueue is the only way a row gets into the outbox: call it in the
// transaction that makes the change the event reports, so the event exists
// if and only if the change committed. An event of a type already enqueued
// for the same SubjectID is not added again. The relays are woken when the
// transaction commits (NOTIFY is delivered at commit), so a relay never
// wakes to a row it cannot see yet. It returns the event's id (the
// CloudEvents id and Nats-Msg-Id). With tracing on, the row keeps the
// traceparent of ctx's span (the request or job that made the change), which
// the relay puts on the envelope.
func Enqueue(ctx context.Context, tx db.DBTX, ev Event) (string, error) {
	subject := Subject(ev.Type)
	if subject == "" || ev.SubjectID == "" || ev.PaymentID == "" {
		return "", fmt.Errorf("enqueue: %q is not an event of the stream, or names no subject and payment", ev.Type)
	}
	id := ids.New("evt_", 12)
	var traceparent *string // NULL unless traced; allocated only then
	if tp := tracing.Traceparent(ctx); tp != "" {
		traceparent = &tp
	}
	err := db.Q.OutboxInsert(ctx, tx, db.OutboxInsertParams{
		ID: id, Type: ev.Type, Subject: subject, SubjectID: ev.SubjectID, PaymentID: ev.PaymentID, Payload: ev.Payload,
		Traceparent: traceparent,
	})
	if err != nil {
		return "", fmt.Errorf("enqueue %s event: %w", ev.Type, err)
	}
	if err := db.Q.OutboxNotify(ctx, tx); err != nil {
		return "", fmt.Errorf("notify outbox: %w", err)
	}
	return id, nil
}

// QueueEnqueueMoved queues Enqueue of a payment's event into a transaction
// sent in one round trip: the event is added only if that transaction moved
// the payment (ev.PaymentID) into status, and its data is payload stamped
// with the time the transaction set as the payment's updated_at. It sends no
// NOTIFY (see Wakeup): once the transaction committed, the caller signals
// its process's Wakeup. ctx gives the traceparent, as for Enqueue.
func QueueEnqueueMoved(ctx context.Context, p *db.Pipeline, ev Event, payload db.Stamped, status string) error {
	subject := Subject(ev.Type)
	if subject == "" || ev.SubjectID != ev.PaymentID || ev.PaymentID == "" {
		return fmt.Errorf("enqueue: %q is not an event of the stream about payment %q", ev.Type, ev.PaymentID)
	}
	arg := db.OutboxInsertMovedParams{
		ID: ids.New("evt_", 12), Type: ev.Type, Subject: subject, PaymentID: ev.PaymentID,
		PayloadHead: payload.Head, PayloadTail: payload.Tail, Status: status,
	}
	if tp := tracing.Traceparent(ctx); tp != "" {
		arg.Traceparent = &tp
	}
	p.Add(func(ctx context.Context, q db.DBTX) error {
		_, err := db.Q.OutboxInsertMoved(ctx, q, arg)
		return err
	})
	return nil
}
