package providersim

import "encoding/json"

// Stripe event types the Stripe face sends.
const (
	StripeEventPISucceeded         = "payment_intent.succeeded"
	StripeEventPIPaymentFailed     = "payment_intent.payment_failed"
	StripeEventPICapturableUpdated = "payment_intent.amount_capturable_updated"
	StripeEventPICanceled          = "payment_intent.canceled"
	StripeEventChargeRefunded      = "charge.refunded"
	StripeEventRefundCreated       = "refund.created"
)

// stripeEventTypes maps the simulator's event types onto Stripe's.
var stripeEventTypes = map[string]string{
	EventChargeSucceeded:  StripeEventPISucceeded,
	EventChargeCaptured:   StripeEventPISucceeded,
	EventChargeFailed:     StripeEventPIPaymentFailed,
	EventChargeAuthorized: StripeEventPICapturableUpdated,
	EventChargeVoided:     StripeEventPICanceled,
	EventChargeExpired:    StripeEventPICanceled,
	EventChargeRefunded:   StripeEventChargeRefunded,
	EventRefundSucceeded:  StripeEventRefundCreated,
}

// stripeEvent is a Stripe event object.
type stripeEvent struct {
	ID              string `json:"id"`
	Object          string `json:"object"`
	APIVersion      string `json:"api_version"`
	Created         int64  `json:"created"`
	Livemode        bool   `json:"livemode"`
	PendingWebhooks int    `json:"pending_webhooks"`
	Type            string `json:"type"`
	Data            struct {
		Object any `json:"object"`
	} `json:"data"`
}

// notifyStripe sends the Stripe event that stands for the simulator's
// eventType about data, signed with Stripe-Signature: the PaymentIntent
// (payment_intent.*), the Charge (charge.refunded) or the Refund
// (refund.created) as it is now.
func (s *Server) notifyStripe(eventType string, data EventData) {
	typ, ok := stripeEventTypes[eventType]
	if !ok {
		return
	}
	ev := stripeEvent{ID: newID("evt_"), Object: "event", APIVersion: StripeAPIVersion, Created: s.now().Unix(), Type: typ}
	switch {
	case data.Refund != nil:
		ev.Data.Object = stripeRefundOf(*data.Refund)
	case typ == StripeEventChargeRefunded:
		ev.Data.Object = stripeChargeOf(data.Charge)
	default:
		ev.Data.Object = stripePIOf(data.Charge, false)
	}
	body, err := json.Marshal(ev)
	if err != nil {
		s.log.Error("webhook not sent: encode event", "event_id", ev.ID, "err", err)
		return
	}
	s.hooks.enqueueBody(ev.ID, ev.Type, body)
}
