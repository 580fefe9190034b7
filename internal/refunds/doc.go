// Package refunds owns the refunds of payments (tables refunds and
// refund_events): a refund walks the same states as a payment
// (internal/lifecycle), and changes status through one Update, like an
// attempt, whatever path learns of it (the API's create and resume,
// webhooks, the reconciler, GET ?sync=true).
//
// # Amounts
//
// A refund's amount is reserved on its payment (attempts.ReserveRefund) in
// the transaction that inserts the refund, under the payment's row lock, so
// refunds that race on several pods never reserve more than the payment's
// amount. The reservation is released when the refund becomes FAILED, and
// counted as refunded when it becomes SUCCEEDED, each in the transition's
// transaction, together with its PaymentRefundFailed or PaymentRefunded
// event.
//
// # Provider key
//
// The provider is asked to refund the payment's charge with the explicit
// amount, reference = the refund id and the idempotency key
// ProviderKey(refund id): the same on every retry of the refund, so the
// provider deduplicates it, and never a payment's key.
package refunds
