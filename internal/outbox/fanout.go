package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/db"
)

// Published is an event the relay has just had acknowledged by JetStream,
// as Config.Fanout gets it.
type Published struct {
	ID        string // the event id (CloudEvents id, Nats-Msg-Id)
	Type      string // the CloudEvents type, e.g. TypePaymentSucceeded
	PaymentID string
	Payload   json.RawMessage // the event's data
	CreatedAt time.Time       // when the transaction that wrote it began
}

// Fanout is called by the relay inside the transaction that marks a
// batch's acknowledged rows published, with those rows. Its writes commit
// with the marks or not at all (the rows are then published again, and
// Fanout called with them again), and the batch's claim is exclusive, so a
// Fanout that adds nothing for an event it has seen runs once per event. An
// error fails the batch, which is retried like any failed batch: the events
// stay in the outbox until Fanout succeeds.
type Fanout func(ctx context.Context, tx pgx.Tx, events []Published) error

// fanout hands the acknowledged rows (acks[i].err == nil) to Config.Fanout.
func (r *Relay) fanout(ctx context.Context, tx pgx.Tx, rows []db.OutboxClaimRow, acks []ack) error {
	if r.cfg.Fanout == nil {
		return nil
	}
	events := make([]Published, 0, len(rows))
	for i, row := range rows {
		if acks[i].err == nil {
			events = append(events, Published{ID: row.ID, Type: row.Type, PaymentID: row.PaymentID, Payload: row.Payload, CreatedAt: row.CreatedAt})
		}
	}
	if len(events) == 0 {
		return nil
	}
	if err := r.cfg.Fanout(ctx, tx, events); err != nil {
		return fmt.Errorf("fan out: %w", err)
	}
	return nil
}
