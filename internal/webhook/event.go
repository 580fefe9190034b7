package webhook

import (
	"encoding/json"
	"errors"

	"github.com/acme/paymentsvc/internal/provider"
)

// Event types the simulator sends.
const (
	EventChargeSucceeded  = "charge.succeeded"
	EventChargeFailed     = "charge.failed"
	EventChargeRefunded   = "charge.refunded"
	EventRefundSucceeded  = "refund.succeeded"
	EventChargeAuthorized = "charge.authorized"
	EventChargeCaptured   = "charge.captured"
	EventChargeVoided     = "charge.voided"
	EventChargeExpired    = "charge.expired"
)

// chargeEvents are the event types about a charge.
var chargeEvents = map[string]bool{
	EventChargeSucceeded: true, EventChargeFailed: true, EventChargeRefunded: true,
	EventChargeAuthorized: true, EventChargeCaptured: true, EventChargeVoided: true, EventChargeExpired: true,
}

// event is the webhook body; fields we do not use are ignored, so the
// provider may add some.
type event struct {
	provider string // the provider whose endpoint received it
	// refundFailure is a failed Stripe Refund's failure code (refund.failed).
	refundFailure string
	// foreign is a Stripe PaymentIntent without metadata[psvc_payment]: on
	// an account other systems share, one we have no payment for is
	// theirs, and changes nothing (no anomaly).
	foreign bool
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Charge *provider.Charge `json:"charge"` // charge.* events
		Refund *provider.Refund `json:"refund"` // refund.* events
	} `json:"data"`
}

// parseEvent decodes body and checks what applying it needs. Its error
// text is the problem detail sent back, so it never quotes the body.
func parseEvent(body []byte) (event, error) {
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return event{}, errors.New("body is not a JSON event object")
	}
	switch {
	case ev.ID == "":
		return event{}, errors.New("id is missing")
	case ev.Type == "":
		return event{}, errors.New("type is missing")
	case ev.Type == EventRefundSucceeded:
		switch {
		case ev.Data.Refund == nil:
			return event{}, errors.New("data.refund is missing")
		case ev.Data.Refund.ID == "":
			return event{}, errors.New("data.refund.id is missing")
		case ev.Data.Refund.Charge == "":
			return event{}, errors.New("data.refund.charge is missing")
		}
		return ev, nil
	case !chargeEvents[ev.Type]:
		return event{}, errors.New("unknown event type")
	case ev.Data.Charge == nil:
		return event{}, errors.New("data.charge is missing")
	case ev.Data.Charge.ID == "":
		return event{}, errors.New("data.charge.id is missing")
	}
	return ev, nil
}

// chargeID is the provider charge the event is about.
func (ev event) chargeID() string {
	if ev.Data.Refund != nil {
		return ev.Data.Refund.Charge
	}
	return ev.Data.Charge.ID
}
