package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/ids"
)

// Event is an event to publish: its type (the CloudEvents type), the payment
// it is about, and its data.
type Event struct {
	Type      string
	PaymentID string
	Payload   json.RawMessage
}

// Enqueue is the only way a row gets into the outbox: call it in the
// transaction that makes the change the event reports, so the event exists
// if and only if the change committed. An event of a type already enqueued
// for the payment is not added again. The relays are woken when the
// transaction commits (NOTIFY is delivered at commit), so a relay never
// wakes to a row it cannot see yet. It returns the event's id (the
// CloudEvents id and Nats-Msg-Id).
func Enqueue(ctx context.Context, tx db.DBTX, ev Event) (string, error) {
	id := ids.New("evt_", 12)
	err := db.Q.OutboxInsert(ctx, tx, db.OutboxInsertParams{
		ID: id, Type: ev.Type, PaymentID: ev.PaymentID, Payload: ev.Payload,
	})
	if err != nil {
		return "", fmt.Errorf("enqueue %s event: %w", ev.Type, err)
	}
	if err := db.Q.OutboxNotify(ctx, tx); err != nil {
		return "", fmt.Errorf("notify outbox: %w", err)
	}
	return id, nil
}
