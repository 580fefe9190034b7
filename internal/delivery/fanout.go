package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/outbox"
)

// message is the body of a delivery: the event as merchants get it.
type message struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// NewFanout returns the outbox relay's hook (outbox.Config.Fanout) that
// turns each batch of published events into deliveries, in the relay's
// marking transaction: one per live endpoint of the event's tenant that
// subscribes to its type and existed when the event was created. A repeat
// of an event adds nothing, so each event fans out once however often the
// relay publishes it. The payment flow never waits for it: the events are
// already committed, and the relay runs apart from requests.
func NewFanout(log *slog.Logger) outbox.Fanout {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, tx pgx.Tx, events []outbox.Published) error {
		p, err := fanoutParams(events, log)
		if err != nil || len(p.EventIds) == 0 {
			return err
		}
		if _, err := db.Q.DeliveryFanout(ctx, tx, p); err != nil {
			return fmt.Errorf("fan out merchant webhooks: %w", err)
		}
		return nil
	}
}

// fanoutParams are the events merchants get, with their bodies. An event
// whose data names no tenant cannot be anyone's: it is logged and left out.
func fanoutParams(events []outbox.Published, log *slog.Logger) (db.DeliveryFanoutParams, error) {
	var p db.DeliveryFanoutParams
	for _, ev := range events {
		typ := EventTypeOf(ev.Type)
		if typ == "" {
			continue
		}
		var data struct {
			TenantID string `json:"tenant_id"`
		}
		if err := json.Unmarshal(ev.Payload, &data); err != nil || data.TenantID == "" {
			log.Error("merchant webhooks: event without a tenant is not delivered", "event_id", ev.ID, "type", ev.Type, "err", err)
			continue
		}
		body, err := json.Marshal(message{
			ID: ev.ID, Type: typ, CreatedAt: ev.CreatedAt.UTC().Format(time.RFC3339), Data: ev.Payload,
		})
		if err != nil {
			return p, fmt.Errorf("body of event %s: %w", ev.ID, err)
		}
		p.EventIds = append(p.EventIds, ev.ID)
		p.TenantIds = append(p.TenantIds, data.TenantID)
		p.EventTypes = append(p.EventTypes, typ)
		p.PaymentIds = append(p.PaymentIds, ev.PaymentID)
		p.Bodies = append(p.Bodies, body)
		p.CreatedAts = append(p.CreatedAts, ev.CreatedAt)
	}
	return p, nil
}
