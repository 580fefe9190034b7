package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// Event is the CloudEvents 1.0 envelope of a PaymentSucceeded event, as the
// payments service publishes it (docs/operations.md, "Events").
type Event struct {
	ID      string    `json:"id"` // the dedupe key: stable across redeliveries
	Source  string    `json:"source"`
	Type    string    `json:"type"`
	Time    time.Time `json:"time"`
	Subject string    `json:"subject"` // the payment id
	// Traceparent is the CloudEvents distributed-tracing extension: the W3C
	// traceparent of the request that produced the event, when it was traced.
	Traceparent string  `json:"traceparent,omitempty"`
	Data        Payment `json:"data"`
}

// Payment is the part of the event's data this consumer uses.
type Payment struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Status   string `json:"status"`
}

// schema is this consumer's own tables: the inbox of processed event ids and
// the effect it applies once per event.
const schema = `
CREATE TABLE IF NOT EXISTS processed_messages (
    event_id     text        PRIMARY KEY,
    processed_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS fulfilments (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id   text        NOT NULL,
    payment_id text        NOT NULL,
    tenant_id  text        NOT NULL,
    order_id   text        NOT NULL,
    amount     bigint      NOT NULL,
    currency   text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);`

// Inbox applies each event at most once, however often it is delivered.
type Inbox struct {
	pool *pgxpool.Pool
}

// Migrate creates the inbox and effect tables if they are missing.
func (in *Inbox) Migrate(ctx context.Context) error {
	_, err := in.pool.Exec(ctx, schema)
	return err
}

// Apply records ev in the inbox and applies its effect, in one transaction:
// either both commit or neither does. A delivery of an event already in the
// inbox inserts nothing and applies nothing; concurrent deliveries serialise
// on the primary key, so exactly one of them applies. It reports whether
// this call applied the event.
func (in *Inbox) Apply(ctx context.Context, ev Event) (applied bool, err error) {
	tx, err := in.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op after Commit

	tag, err := tx.Exec(ctx, `INSERT INTO processed_messages (event_id) VALUES ($1) ON CONFLICT DO NOTHING`, ev.ID)
	if err != nil {
		return false, fmt.Errorf("inbox: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil // seen before: a redelivery or a republish
	}
	if err := fulfil(ctx, tx, ev); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

// fulfil is the consumer's own effect of a payment succeeding.
func fulfil(ctx context.Context, tx pgx.Tx, ev Event) error {
	p := ev.Data
	_, err := tx.Exec(ctx, `
		INSERT INTO fulfilments (event_id, payment_id, tenant_id, order_id, amount, currency)
		VALUES ($1, $2, $3, $4, $5, $6)`, ev.ID, p.ID, p.TenantID, p.OrderID, p.Amount, p.Currency)
	if err != nil {
		return fmt.Errorf("fulfil: %w", err)
	}
	return nil
}

// errPoison marks a message that no redelivery can make valid.
var errPoison = errors.New("undecodable event")

// Handle processes one delivery: decode, Apply, and only after the commit
// Ack. A crash before the Ack gets the message redelivered, which Apply then
// recognises. It reports whether the event was applied by this delivery.
func (in *Inbox) Handle(ctx context.Context, msg jetstream.Msg) (applied bool, err error) {
	var ev Event
	if err := json.Unmarshal(msg.Data(), &ev); err != nil || ev.ID == "" {
		_ = msg.TermWithReason("undecodable") // never redeliver it
		return false, fmt.Errorf("%w: %v", errPoison, err)
	}
	if ev.Type != "PaymentSucceeded" {
		return false, msg.Ack() // not ours to handle
	}
	ctx, span := startProcessing(ctx, ev)
	defer span.End()
	applied, err = in.Apply(ctx, ev)
	span.SetAttributes(attribute.Bool("consumer.applied", applied))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "apply failed")
		// Database trouble: let JetStream redeliver a little later.
		_ = msg.NakWithDelay(5 * time.Second)
		return false, err
	}
	return applied, msg.Ack()
}
