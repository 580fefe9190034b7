package webhook

import "github.com/acme/paymentsvc/internal/attempts"

type verdictKind int

const (
	verdictNoop     verdictKind = iota // the report agrees with the attempt
	verdictMove                        // the report moves the attempt along an edge
	verdictConflict                    // the report contradicts the attempt
	verdictRefund                      // a refund of a SUCCEEDED attempt's charge
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
		// A refund is not a transition: SUCCEEDED stays SUCCEEDED, but
		// settlement and humans must see that the money went back. A refund
		// of any other attempt's charge is settlement refunding an orphan.
		if a.Status == attempts.Succeeded {
			return verdict{kind: verdictRefund, reason: "the charge of a SUCCEEDED payment was refunded"}
		}
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
		return verdict{kind: verdictConflict, reason: "provider reports a charge for a payment that never reached it"}
	}
}
