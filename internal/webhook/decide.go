package webhook

import (
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
	}
	return verdict{kind: verdictNoop} // parseEvent admits no other type
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

// decideRefund says what a refund.succeeded event means for refund r, read
// under its row lock: pure, like decide.
func decideRefund(r refunds.Refund, ev event) verdict {
	re := ev.Data.Refund
	if r.ProviderRefundID != nil && *r.ProviderRefundID != re.ID {
		return verdict{kind: verdictConflict, reason: "the refund recorded a different provider refund"}
	}
	return report(r.Status, lifecycle.Succeeded)
}
