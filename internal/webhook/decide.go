package webhook

import (
	"time"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/refunds"
)

type verdictKind int

const (
	verdictNoop     verdictKind = iota // the report agrees with the attempt
	verdictMove                        // the report moves the attempt along an edge
	verdictConflict                    // the report contradicts the attempt
)

// verdict is what an event means for an attempt.
type verdict struct {
	kind   verdictKind
	to     attempts.Status // for verdictMove
	reason string          // for anomalies
	// For a move of a manual payment: what it captured (SUCCEEDED), its
	// deadline (AUTHORIZED), why it is CANCELED, and whether the provider
	// did it without a capture or void of ours.
	captured       int64
	captureBefore  *time.Time
	canceledReason string
	unexpected     bool
}

// decide says what ev means for attempt a, read under its row lock. It is
// pure so that every case of the table can be tested without a database.
func decide(a attempts.Attempt, ev event) verdict {
	ch := ev.Data.Charge
	if a.ProviderChargeID != nil && *a.ProviderChargeID != ch.ID {
		return verdict{kind: verdictConflict, reason: "the payment recorded a different charge"}
	}
	switch ev.Type {
	case EventChargeSucceeded:
		return report(a.Status, attempts.Succeeded)
	case EventChargeFailed:
		return report(a.Status, attempts.Failed)
	case EventChargeRefunded:
		// A refund is not a transition of the payment: SUCCEEDED stays
		// SUCCEEDED. The event names no refund of ours; the handler syncs the
		// payment's unresolved refunds after it (refund.succeeded resolves
		// them directly).
		return verdict{kind: verdictNoop}
	case EventChargeAuthorized, EventChargeCaptured, EventChargeVoided, EventChargeExpired:
		return decideHeld(a, ev)
	}
	return verdict{kind: verdictNoop} // parseEvent admits no other type
}

// decideHeld says what an event about an authorization means for payment
// a, with no capture or void of ours behind it (the handler gives those to
// their capture or void): an authorization makes a PENDING or UNKNOWN
// manual payment AUTHORIZED (a late one changes nothing); a capture, void
// or expiry made at the provider moves it all the same, to SUCCEEDED (what
// the provider captured) or CANCELED (voided_at_provider, expired), a
// capture or void being unexpected (an anomaly), an expiry being nobody's.
// A payment that cannot take the move (an automatic one, or one final
// otherwise) is a conflict.
func decideHeld(a attempts.Attempt, ev event) verdict {
	ch := ev.Data.Charge
	v := verdict{kind: verdictMove}
	switch ev.Type {
	case EventChargeAuthorized:
		v.to = attempts.Authorized
		if ch.CaptureBefore > 0 {
			t := time.Unix(ch.CaptureBefore, 0).UTC()
			v.captureBefore = &t
		}
		if a.Manual() && (a.Status == attempts.Succeeded || a.Status == attempts.Canceled) {
			return verdict{kind: verdictNoop} // late: captured, voided or expired since
		}
	case EventChargeCaptured:
		v.to, v.captured, v.unexpected = attempts.Succeeded, ch.CapturedAmount(), true
	case EventChargeVoided:
		v.to, v.canceledReason, v.unexpected = attempts.Canceled, lifecycle.CanceledAtProvider, true
	case EventChargeExpired:
		v.to, v.canceledReason = attempts.Canceled, lifecycle.CanceledExpired
	}
	switch {
	case a.Status == v.to:
		return verdict{kind: verdictNoop}
	case !a.Machine().CanTransition(a.Status, v.to):
		return verdict{kind: verdictConflict, reason: "provider reports " + ev.Type + " for a " + a.CaptureMethod + " payment in " + string(a.Status)}
	}
	return v
}

// report is the verdict on a provider saying the charge ended in final.
func report(current, final attempts.Status) verdict {
	switch {
	case current == final:
		return verdict{kind: verdictNoop}
	case current.Final():
		return verdict{kind: verdictConflict, reason: "provider reports " + string(final) + " for a " + string(current) + " payment"}
	case current == attempts.Pending || current == attempts.Unknown:
		return verdict{kind: verdictMove, to: final}
	default:
		// CREATED is committed before the provider is called, and PENDING
		// before the call is made, so the provider cannot have a charge for
		// a CREATED attempt: something is wrong, and a human should look.
		return verdict{kind: verdictConflict, reason: "provider reports on a payment or refund that never reached it"}
	}
}

// decideRefund says what a refund.succeeded (or failed) event means for refund r, read
// under its row lock: pure, like decide.
func decideRefund(r refunds.Refund, ev event) verdict {
	re := ev.Data.Refund
	if r.ProviderRefundID != nil && *r.ProviderRefundID != re.ID {
		return verdict{kind: verdictConflict, reason: "the refund recorded a different provider refund"}
	}
	if ev.Type == eventRefundFailed {
		return report(r.Status, lifecycle.Failed)
	}
	return report(r.Status, lifecycle.Succeeded)
}
