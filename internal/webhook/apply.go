package webhook

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/refunds"
)

// Outcomes, stored in webhook_events.outcome (all but duplicate) and counted
// in metrics.WebhookOutcomes.
const (
	outcomeApplied       = "applied"        // the event moved its attempt
	outcomeNoop          = "noop"           // the event agrees with what we know
	outcomeAnomaly       = "anomaly"        // the event contradicts what we know: anomaly recorded
	outcomeUnknownCharge = "unknown_charge" // no attempt for the charge: anomaly recorded
	outcomeUnknownRefund = "unknown_refund" // no refund of ours behind the provider's: anomaly recorded
	outcomeDuplicate     = "duplicate"      // the event was seen before: nothing done
	outcomeIgnored       = "ignored"        // a Stripe event that changes nothing (not stored)
)

// Anomaly kinds this package records.
const (
	anomalyConflictingReport = "conflicting_report"
	anomalyUnknownCharge     = "unknown_charge"
	anomalyUnexpectedRefund  = "unexpected_refund"
	anomalyWrongProvider     = "wrong_provider"
)

// defaultFailureCode is used for a charge.failed event without a failure code.
const defaultFailureCode = "provider_failed"

// result is what processing one event did.
type result struct {
	outcome   string
	attemptID string
	refundID  string // the refund a refund event was about, when found
	// captureID is the capture or void of ours (of captureKind) a
	// charge.captured or charge.voided event was about, when found.
	captureID   string
	captureKind captures.Kind
	moved       attempts.Status // the status the attempt (or operation) moved to, when applied
	// syncRefunds asks the handler, after the commit, to sync the unresolved
	// refunds of payment attemptID (a charge.refunded event names none of
	// them).
	syncRefunds bool
}

// process records ev and applies it, all in one transaction: the event row
// is the claim, so an event is applied at most once however often and on
// however many pods it is delivered.
func process(ctx context.Context, tx pgx.Tx, ev event, body []byte) (result, error) {
	chargeID := ev.chargeID()
	n, err := db.Q.WebhookEventInsert(ctx, tx, db.WebhookEventInsertParams{
		Provider: ev.provider, EventID: ev.ID, Type: ev.Type, ChargeID: &chargeID, Payload: body,
	})
	if err != nil {
		return result{}, fmt.Errorf("insert webhook event: %w", db.Translate(err))
	}
	if n == 0 {
		return result{outcome: outcomeDuplicate}, nil
	}
	apply := applyCharge
	if ev.Type == EventRefundSucceeded || ev.Type == eventRefundFailed {
		apply = applyRefund
	}
	res, err := apply(ctx, tx, ev)
	if err != nil {
		return result{}, err
	}
	var attemptID *string
	if res.attemptID != "" {
		attemptID = &res.attemptID
	}
	err = db.Q.WebhookEventSetOutcome(ctx, tx, db.WebhookEventSetOutcomeParams{
		Provider: ev.provider, EventID: ev.ID, Outcome: res.outcome, AttemptID: attemptID,
	})
	if err != nil {
		return result{}, fmt.Errorf("set webhook event outcome: %w", err)
	}
	return res, nil
}

// applyCharge makes the attempt agree with a charge event where the state
// machine allows it, and records an anomaly where it contradicts what we know.
func applyCharge(ctx context.Context, tx pgx.Tx, ev event) (result, error) {
	ch := ev.Data.Charge
	found, ok, err := findAttempt(ctx, tx, ch)
	if err != nil {
		return result{}, err
	}
	if ev.Type == EventChargeRefunded {
		// It names no refund of ours: it only prompts a sync of the
		// payment's unresolved refunds (settlement's refunds of orphan
		// charges have no payment: nothing to do).
		res := result{outcome: outcomeNoop}
		if ok && found.ProviderName() == ev.provider {
			res.attemptID, res.syncRefunds = found.ID, true
		}
		return res, nil
	}
	if !ok {
		if ev.foreign {
			return result{outcome: outcomeNoop}, nil // another system's PaymentIntent
		}
		if ev.Type == EventChargeVoided && ch.VoidKey == captures.OrphanVoidKey(ch.ID) {
			return result{outcome: outcomeNoop}, nil // settlement voided an orphan authorization
		}
		err := attempts.RecordAnomaly(ctx, tx, anomaly(anomalyUnknownCharge, ev, nil, "no payment for this charge"))
		return result{outcome: outcomeUnknownCharge}, err
	}
	if found.ProviderName() == ev.provider {
		// A capture or void of ours is resolved as itself, which moves
		// the payment with it.
		op, ours, err := ourHold(ctx, tx, found, ev)
		if err != nil || ours {
			if err != nil {
				return result{}, err
			}
			return applyHold(ctx, tx, ev, found, op)
		}
	}
	// Decide on the locked row: a racing API transaction or reconciler either
	// committed before the lock (and decide sees its status) or waits for our
	// commit (and then decides on ours). The provider too is judged there:
	// the row read above may be a payment that was CREATED (at no provider)
	// and that a request is committing PENDING at another one right now.
	var (
		v     verdict
		wrong bool // the payment is not at this provider
	)
	a, moved, err := attempts.Update(ctx, tx, found.ID, func(a attempts.Attempt) (attempts.Change, bool) {
		if wrong = a.Provider != nil && *a.Provider != ev.provider; wrong {
			return attempts.Change{}, false
		}
		v = decide(a, ev)
		return change(ev, v), v.kind == verdictMove
	})
	if err != nil {
		return result{}, err
	}
	res := result{attemptID: a.ID}
	if wrong {
		// Whatever this provider says of a payment that is not at it
		// changes nothing.
		res.outcome = outcomeAnomaly
		err = attempts.RecordAnomaly(ctx, tx, anomaly(anomalyWrongProvider, ev, &a, "the payment is at provider "+a.ProviderName()))
		return res, err
	}
	err = settle(&res, moved, v, func(reason string) error {
		return attempts.RecordAnomaly(ctx, tx, anomaly(anomalyConflictingReport, ev, &a, reason))
	})
	return res, err
}

// settle sets the outcome of an event decided (v) on a locked row: applied
// when the row moved, an anomaly (recorded by conflict) when the event
// contradicts it, else noop: verdictNoop, or a move that Update found is no
// edge (cannot happen while decide checks edges on the locked row).
func settle(res *result, moved bool, v verdict, conflict func(reason string) error) error {
	switch {
	case moved:
		res.outcome, res.moved = outcomeApplied, v.to
	case v.kind == verdictConflict:
		res.outcome = outcomeAnomaly
		return conflict(v.reason)
	default:
		res.outcome = outcomeNoop
	}
	return nil
}

// applyRefund makes our refund agree with a refund.succeeded event (or a
// Stripe Refund that failed), or
// records that the provider refunded something no refund of ours stands for
// (unexpected_refund; settlement's own refunds of orphan charges excepted).
func applyRefund(ctx context.Context, tx pgx.Tx, ev event) (result, error) {
	re := ev.Data.Refund
	found, ok, err := findRefund(ctx, tx, re)
	if err != nil {
		return result{}, err
	}
	if ok && found.Provider != ev.provider {
		err := attempts.RecordAnomaly(ctx, tx, refundAnomaly(anomalyWrongProvider, ev, &found, "the refund is at provider "+found.Provider))
		return result{outcome: outcomeAnomaly, attemptID: found.PaymentID, refundID: found.ID}, err
	}
	if !ok {
		if refunds.IsOrphanKeyOf(re.IdempotencyKey, re.Charge) {
			return result{outcome: outcomeNoop}, nil // settlement refunded an orphan charge
		}
		err := attempts.RecordAnomaly(ctx, tx, refundAnomaly(anomalyUnexpectedRefund, ev, nil, "no refund of ours for this provider refund"))
		return result{outcome: outcomeUnknownRefund}, err
	}
	var v verdict
	r, moved, err := refunds.Update(ctx, tx, found.ID, func(r refunds.Refund) (refunds.Change, bool) {
		v = decideRefund(r, ev)
		c := refunds.Change{
			To: v.to, ProviderRefundID: re.ID, Source: lifecycle.SourceWebhook, Reason: ev.Type + " " + ev.ID,
		}
		if v.to == lifecycle.Failed {
			c.FailureCode = ev.refundFailure
		}
		return c, v.kind == verdictMove
	})
	if err != nil {
		return result{}, err
	}
	res := result{attemptID: r.PaymentID, refundID: r.ID}
	err = settle(&res, moved, v, func(reason string) error {
		return attempts.RecordAnomaly(ctx, tx, refundAnomaly(anomalyConflictingReport, ev, &r, reason))
	})
	return res, err
}

// findRefund finds the refund a provider refund stands for: by our reference
// (the refund id; from the derived key when a provider does not echo the
// reference), cross-checked against the derived key when the provider's
// refund carries one, else by the provider refund id we recorded.
func findRefund(ctx context.Context, tx pgx.Tx, re *provider.Refund) (refunds.Refund, bool, error) {
	ref := re.Reference
	if ref == "" {
		ref = refunds.IDOfProviderKey(re.IdempotencyKey)
	}
	if ref != "" {
		r, err := refunds.Get(ctx, tx, ref)
		switch {
		case err == nil:
			if re.IdempotencyKey == "" || re.IdempotencyKey == refunds.ProviderKey(r.ID) {
				return r, true, nil
			}
		case !errors.Is(err, refunds.ErrNotFound):
			return refunds.Refund{}, false, fmt.Errorf("find refund by reference: %w", err)
		}
	}
	r, err := refunds.GetByProviderRefundID(ctx, tx, re.ID)
	switch {
	case err == nil:
		return r, true, nil
	case errors.Is(err, refunds.ErrNotFound):
		return refunds.Refund{}, false, nil
	default:
		return refunds.Refund{}, false, fmt.Errorf("find refund by provider refund id: %w", err)
	}
}

// refundAnomaly describes a report about refund r (nil: none found).
func refundAnomaly(kind string, ev event, r *refunds.Refund, reason string) attempts.Anomaly {
	re := ev.Data.Refund
	detail := map[string]any{
		"reason": reason, "event_id": ev.ID, "event_type": ev.Type,
		"provider_refund_id": re.ID, "charge_id": re.Charge, "amount": re.Amount,
		"reference": re.Reference, "idempotency_key": re.IdempotencyKey,
	}
	out := attempts.Anomaly{
		Kind: kind, ChargeID: re.Charge, Source: attempts.SourceWebhook,
		Detail: detail, DedupeKey: "webhook:" + ev.provider + ":" + ev.ID,
	}
	if r != nil {
		out.AttemptID = r.PaymentID
		detail["refund_id"] = r.ID
		detail["refund_status"] = r.Status
	}
	return out
}

// change is the transition a verdictMove asks for.
func change(ev event, v verdict) attempts.Change {
	c := attempts.Change{
		To: v.to, ChargeID: ev.Data.Charge.ID,
		AmountCaptured: v.captured, CaptureBefore: v.captureBefore, CanceledReason: v.canceledReason, Unexpected: v.unexpected,
		Source: attempts.SourceWebhook, Reason: ev.Type + " " + ev.ID,
	}
	if v.to == attempts.Failed {
		c.FailureCode = ev.Data.Charge.FailureCode
		if c.FailureCode == "" {
			c.FailureCode = defaultFailureCode
		}
	}
	return c
}

// findAttempt finds the attempt a charge belongs to: by our reference (the
// payment id; from the derived key when a provider does not echo the
// reference), cross-checked against the provider key when the charge
// carries one, else by the charge id we recorded.
func findAttempt(ctx context.Context, tx pgx.Tx, ch *provider.Charge) (attempts.Attempt, bool, error) {
	ref := ch.Reference
	if ref == "" {
		ref = attempts.IDOfProviderKey(ch.IdempotencyKey)
	}
	if ref != "" {
		a, err := attempts.Get(ctx, tx, ref)
		switch {
		case err == nil:
			if ch.IdempotencyKey == "" || ch.IdempotencyKey == attempts.ProviderKey(a.ID) {
				return a, true, nil
			}
			// The reference names a payment, but the charge was not made
			// with its key, so it is not that payment's charge.
		case !errors.Is(err, attempts.ErrNotFound):
			return attempts.Attempt{}, false, fmt.Errorf("find attempt by reference: %w", err)
		}
	}
	a, err := attempts.GetByChargeID(ctx, tx, ch.ID)
	switch {
	case err == nil:
		return a, true, nil
	case errors.Is(err, attempts.ErrNotFound):
		return attempts.Attempt{}, false, nil
	default:
		return attempts.Attempt{}, false, fmt.Errorf("find attempt by charge id: %w", err)
	}
}

// anomaly describes a report about attempt a (nil: none found). The dedupe
// key is the event's, so a redelivered event never records a second one.
func anomaly(kind string, ev event, a *attempts.Attempt, reason string) attempts.Anomaly {
	ch := ev.Data.Charge
	detail := map[string]any{
		"reason":          reason,
		"event_id":        ev.ID,
		"event_type":      ev.Type,
		"charge_id":       ch.ID,
		"charge_status":   ch.Status,
		"reference":       ch.Reference,
		"idempotency_key": ch.IdempotencyKey,
		"amount":          ch.Amount,
		"currency":        ch.Currency,
	}
	out := attempts.Anomaly{
		Kind: kind, ChargeID: ch.ID, Source: attempts.SourceWebhook,
		Detail: detail, DedupeKey: "webhook:" + ev.provider + ":" + ev.ID,
	}
	if a != nil {
		out.AttemptID = a.ID
		detail["attempt_status"] = a.Status
		detail["attempt_charge_id"] = a.ProviderChargeID
	}
	return out
}
