package reconcile

import (
	"context"

	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/tracing"
	"github.com/acme/paymentsvc/internal/webhook"
)

// GCReport is what GC deleted; reconciler gc prints it.
type GCReport struct {
	// Deleted is the expired idempotency keys of final payments.
	Deleted int `json:"deleted"`
	// WebhookEventsDeleted is the webhook events received more than
	// WebhookEventTTL ago.
	WebhookEventsDeleted int `json:"webhook_events_deleted"`
	// OutboxDeleted is the outbox rows published more than OutboxRetention ago.
	OutboxDeleted int `json:"outbox_deleted"`
}

// GC deletes, GCBatchSize rows per statement (each its own short
// transaction, so no lock is held long and vacuum keeps up): the
// idempotency keys past their expiry whose attempt is final, the webhook
// events received more than WebhookEventTTL ago, and the outbox rows
// published more than OutboxRetention ago (never an unpublished one). Ages
// are judged by the database clock. Each table's package owns its delete;
// GC only calls them. The report counts what was deleted, also when GC
// fails midway.
func (r *Reconciler) GC(ctx context.Context) (_ GCReport, err error) {
	ctx, span := tracing.Start(ctx, "reconciler gc")
	defer func() { endSpan(span, err) }()
	var rep GCReport
	if rep.Deleted, err = idempotency.DeleteExpired(ctx, r.pool, r.cfg.GCBatchSize); err != nil {
		return rep, err
	}
	r.log.Info("expired idempotency keys deleted", "deleted", rep.Deleted)
	if rep.WebhookEventsDeleted, err = webhook.DeleteReceivedBefore(ctx, r.pool, r.cfg.WebhookEventTTL, r.cfg.GCBatchSize); err != nil {
		return rep, err
	}
	r.log.Info("old webhook events deleted", "deleted", rep.WebhookEventsDeleted, "ttl", r.cfg.WebhookEventTTL.String())
	if rep.OutboxDeleted, err = outbox.DeletePublishedBefore(ctx, r.pool, r.cfg.OutboxRetention, r.cfg.GCBatchSize); err != nil {
		return rep, err
	}
	r.log.Info("published outbox rows deleted", "deleted", rep.OutboxDeleted, "retention", r.cfg.OutboxRetention.String())
	return rep, nil
}
