package webhook

import (
	"encoding/json"
	"errors"

	"github.com/acme/paymentsvc/internal/provider"
)

// HeaderStripeSignature carries a Stripe provider's signature of the body:
// "t=UNIX,v1=HEX[,v1=HEX…]", the same scheme as Sim-Signature.
const HeaderStripeSignature = "Stripe-Signature"

// The Stripe event types a Stripe provider's endpoint applies; Stripe
// sends many others, which are answered 200 and change nothing.
const (
	StripePaymentIntentSucceeded         = "payment_intent.succeeded"
	StripePaymentIntentPaymentFailed     = "payment_intent.payment_failed"
	StripePaymentIntentCapturableUpdated = "payment_intent.amount_capturable_updated"
	StripePaymentIntentCanceled          = "payment_intent.canceled"
	StripeChargeRefunded                 = "charge.refunded"
	StripeChargeRefundUpdated            = "charge.refund.updated"
	StripeRefundCreated                  = "refund.created"
	StripeRefundUpdated                  = "refund.updated"
	StripeRefundFailed                   = "refund.failed"
)

// eventRefundFailed is the internal type a failed or canceled Stripe
// Refund is applied as (the simulator sends no such event).
const eventRefundFailed = "refund.failed"

// defaultRefundFailureCode is a failed Stripe Refund's failure_code when
// it carries none.
const defaultRefundFailureCode = "refund_failed"

// canceledFailureCode is the failure code of an automatic payment whose
// PaymentIntent was canceled without a payment error.
const canceledFailureCode = "canceled"

// stripeEvent is a Stripe event object; only the fields used are read, so
// an event of another API version is accepted when its object has them.
type stripeEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object *stripeObject `json:"object"`
	} `json:"data"`
}

// stripeObject is the PaymentIntent, Charge or Refund of an event.
type stripeObject struct {
	ID                 string            `json:"id"`
	Amount             int64             `json:"amount"`
	AmountReceived     int64             `json:"amount_received"`
	AmountCapturable   int64             `json:"amount_capturable"`
	Currency           string            `json:"currency"`
	Status             string            `json:"status"`
	CaptureMethod      string            `json:"capture_method"`
	CancellationReason string            `json:"cancellation_reason"`
	Created            int64             `json:"created"`
	Metadata           map[string]string `json:"metadata"`
	LatestCharge       json.RawMessage   `json:"latest_charge"`  // an id, or the Charge
	PaymentIntent      json.RawMessage   `json:"payment_intent"` // of a Charge or Refund: an id, or the PaymentIntent
	FailureReason      string            `json:"failure_reason"` // of a Refund
	LastPaymentError   *struct {
		Code        string `json:"code"`
		DeclineCode string `json:"decline_code"`
	} `json:"last_payment_error"`
}

// idOf reads an expandable field: an id, or an object with one.
func idOf(raw json.RawMessage) string {
	var id string
	if json.Unmarshal(raw, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(raw, &obj)
	return obj.ID
}

// captureBeforeOf is the expanded latest_charge's
// payment_method_details.card.capture_before, or 0.
func captureBeforeOf(raw json.RawMessage) int64 {
	var ch struct {
		PaymentMethodDetails struct {
			Card struct {
				CaptureBefore int64 `json:"capture_before"`
			} `json:"card"`
		} `json:"payment_method_details"`
	}
	_ = json.Unmarshal(raw, &ch)
	return ch.PaymentMethodDetails.Card.CaptureBefore
}

// stripeHandled are the event types applied, by the kind of their object.
var stripeHandled = map[string]string{
	StripePaymentIntentSucceeded: "payment_intent", StripePaymentIntentPaymentFailed: "payment_intent",
	StripePaymentIntentCapturableUpdated: "payment_intent", StripePaymentIntentCanceled: "payment_intent",
	StripeChargeRefunded:      "charge",
	StripeChargeRefundUpdated: "refund", StripeRefundCreated: "refund", StripeRefundUpdated: "refund", StripeRefundFailed: "refund",
}

// parseStripeEvent decodes a Stripe event and translates it into the
// simulator's event that has the same effect, so that one apply logic
// serves both: a PaymentIntent is the charge (its id is the payment's
// provider_charge_id, its metadata[psvc_payment] the reference), a Refund
// is the refund (metadata[psvc_refund] the reference). apply is false for
// an event that changes nothing: a type not handled, or a Refund still
// pending. Its error text is the problem detail sent back.
func parseStripeEvent(body []byte) (ev event, apply bool, err error) {
	var se stripeEvent
	if err := json.Unmarshal(body, &se); err != nil {
		return event{}, false, errors.New("body is not a JSON event object")
	}
	switch {
	case se.ID == "":
		return event{}, false, errors.New("id is missing")
	case se.Type == "":
		return event{}, false, errors.New("type is missing")
	}
	kind, handled := stripeHandled[se.Type]
	if !handled {
		return event{ID: se.ID, Type: se.Type}, false, nil
	}
	obj := se.Data.Object
	if obj == nil || obj.ID == "" {
		return event{}, false, errors.New("data.object.id is missing")
	}
	ev = event{ID: se.ID, Created: se.Created}
	switch kind {
	case "refund":
		return stripeRefundEvent(ev, se.Type, obj)
	case "charge":
		ev.Type = EventChargeRefunded
		ev.Data.Charge = &provider.Charge{
			ID: idOf(obj.PaymentIntent), Amount: obj.Amount, Currency: obj.Currency,
			Status: provider.ChargeSucceeded, Reference: obj.Metadata["psvc_payment"], Refunded: true,
		}
		if ev.Data.Charge.ID == "" {
			return event{}, false, errors.New("data.object.payment_intent is missing")
		}
		return ev, true, nil
	}
	ch := &provider.Charge{
		ID: obj.ID, Amount: obj.Amount, Currency: obj.Currency, Reference: obj.Metadata["psvc_payment"],
		Created: obj.Created, AmountCapturable: obj.AmountCapturable,
	}
	ev.Data.Charge = ch
	ev.foreign = ch.Reference == ""
	manual := obj.CaptureMethod == "manual"
	switch se.Type {
	case StripePaymentIntentSucceeded:
		ch.Status, ch.Captured, ch.AmountCaptured = provider.ChargeSucceeded, true, obj.AmountReceived
		ev.Type = EventChargeSucceeded
		if manual {
			ev.Type = EventChargeCaptured // by a capture of ours, or at the provider
		}
	case StripePaymentIntentPaymentFailed:
		ch.Status, ch.FailureCode = provider.ChargeFailed, failureCodeOf(obj)
		ev.Type = EventChargeFailed
	case StripePaymentIntentCapturableUpdated:
		ch.Status, ch.CaptureBefore = provider.ChargeAuthorized, captureBeforeOf(obj.LatestCharge)
		ev.Type = EventChargeAuthorized
	case StripePaymentIntentCanceled:
		switch {
		case !manual:
			// An automatic PaymentIntent canceled moved no money: the
			// payment failed (a no-op for one already FAILED).
			ch.Status, ch.FailureCode = provider.ChargeFailed, failureCodeOf(obj)
			if obj.LastPaymentError == nil {
				ch.FailureCode = canceledFailureCode
			}
			ev.Type = EventChargeFailed
		case obj.CancellationReason == "automatic":
			ch.Status, ev.Type = provider.ChargeExpired, EventChargeExpired
		default:
			// Our void when one is live, else a void at the provider.
			ch.Status, ev.Type = provider.ChargeVoided, EventChargeVoided
		}
	}
	return ev, true, nil
}

// failureCodeOf is a failed PaymentIntent's failure code: the error's
// decline_code, else its code.
func failureCodeOf(obj *stripeObject) string {
	if e := obj.LastPaymentError; e != nil {
		if e.DeclineCode != "" {
			return e.DeclineCode
		}
		return e.Code
	}
	return ""
}

// stripeRefundEvent translates a Refund event: succeeded resolves our
// refund, failed or canceled fails it, anything else (pending,
// requires_action) changes nothing yet.
func stripeRefundEvent(ev event, typ string, obj *stripeObject) (event, bool, error) {
	ev.Data.Refund = &provider.Refund{
		ID: obj.ID, Charge: idOf(obj.PaymentIntent), Amount: obj.Amount, Status: obj.Status,
		Reference: obj.Metadata["psvc_refund"], Created: obj.Created,
	}
	switch {
	case typ == StripeRefundFailed || obj.Status == "failed" || obj.Status == "canceled":
		ev.Type = eventRefundFailed
		ev.refundFailure = obj.FailureReason
		if ev.refundFailure == "" {
			ev.refundFailure = defaultRefundFailureCode
		}
	case obj.Status == provider.RefundSucceeded:
		ev.Type = EventRefundSucceeded
	default:
		ev.Type = typ
		return ev, false, nil
	}
	return ev, true, nil
}
