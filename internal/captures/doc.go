// Package captures owns the captures and voids of AUTHORIZED payments
// (tables captures and capture_events): the two ways a held authorization
// ends by our hand. Each is an operation on a payment like a refund: it
// walks the operation's states (internal/lifecycle) and changes status
// through one Update, whatever path learns of it (the API's create and
// resume, webhooks, the reconciler, GET ?sync=true).
//
// # Exclusivity
//
// A payment has at most one capture or void that is not FAILED: both kinds
// live in one table with a unique index on payment_id WHERE status <>
// 'FAILED'. Create decides it under the payment's row lock (the payment
// must be AUTHORIZED and hold no such capture or void), in the transaction
// of the request's idempotency key, and the index backs the decision, so a
// capture racing a void on two pods has exactly one winner: the other is
// refused (409) and keeps nothing. A FAILED one frees the payment for
// another capture or void.
//
// # What it does to the payment
//
// In the transaction of its transition: a capture that becomes SUCCEEDED
// makes the payment SUCCEEDED with amount_captured (its PaymentSucceeded
// event); a void that becomes SUCCEEDED makes it CANCELED with the void's
// reason (PaymentCanceled). A FAILED one leaves it AUTHORIZED, unless the
// caller says what the provider showed of the charge after the refusal
// (Change.Seen: captured elsewhere, voided or expired), which is applied
// with it, so money that moved is never left looking held.
//
// # Provider key
//
// The provider is asked to capture or void the payment's charge with
// reference = the capture's or void's id and the idempotency key
// ProviderKey(id), the same on every retry of it.
package captures
