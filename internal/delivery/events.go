package delivery

import (
	"slices"

	"github.com/acme/paymentsvc/internal/outbox"
)

// The event types an endpoint subscribes to (its event_types), in the order
// the API documents them.
const (
	EventPaymentSucceeded  = "payment.succeeded"
	EventPaymentFailed     = "payment.failed"
	EventPaymentAuthorized = "payment.authorized"
	EventPaymentCanceled   = "payment.canceled"
	EventRefundSucceeded   = "refund.succeeded"
	EventRefundFailed      = "refund.failed"
)

// EventTypes are every event type, in the order the API documents them.
var EventTypes = []string{
	EventPaymentSucceeded, EventPaymentFailed, EventPaymentAuthorized, EventPaymentCanceled,
	EventRefundSucceeded, EventRefundFailed,
}

// fromOutbox maps the outbox's CloudEvents types to the merchant's event
// types. PaymentAuthorized and PaymentCanceled are the events of manual
// capture (authorize now, capture later); an outbox type without an entry is
// not delivered to merchants.
var fromOutbox = map[string]string{
	outbox.TypePaymentSucceeded:    EventPaymentSucceeded,
	outbox.TypePaymentFailed:       EventPaymentFailed,
	"PaymentAuthorized":            EventPaymentAuthorized,
	"PaymentCanceled":              EventPaymentCanceled,
	outbox.TypePaymentRefunded:     EventRefundSucceeded,
	outbox.TypePaymentRefundFailed: EventRefundFailed,
}

// EventTypeOf is the merchant's event type of an outbox event of type
// cloudEventsType, "" for one merchants do not get.
func EventTypeOf(cloudEventsType string) string { return fromOutbox[cloudEventsType] }

// KnownEventType reports whether t is one of EventTypes.
func KnownEventType(t string) bool { return slices.Contains(EventTypes, t) }
