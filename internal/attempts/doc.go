// Package attempts owns the stored attempt of a payment (payment_attempts,
// its audit rows in payment_attempt_events, and anomalies): its statuses,
// the legal edges between them, and the one Update that every path changes
// an attempt through (the API's create and resume, webhooks, the reconciler
// and GET ?sync=true). No other package runs SQL on these tables.
//
// # State machine
//
// The statuses and edges are internal/lifecycle's (shared with refunds; see
// its package comment). CREATED means the attempt and its idempotency key
// are committed and the provider has not been called. PENDING is committed
// before the first provider call, so a crash from then on leaves a PENDING
// attempt that a retry or the reconciler resolves by asking the provider;
// a request none of whose calls can have reached the provider moves it back
// to CREATED (not_sent) before answering 503. UNKNOWN means the provider may
// or may not have charged: it is never guessed to be FAILED. SUCCEEDED and
// FAILED are final: nothing moves an attempt out of them; a report that
// contradicts a final status is recorded as an anomaly instead.
//
// A manual payment (CaptureManual) moves along lifecycle.Manual instead
// (Attempt.Machine): AUTHORIZED once the provider holds the amount, then
// SUCCEEDED (its capture, amount_captured) or CANCELED (its void, or an
// expiry). AUTHORIZED and CANCELED write PaymentAuthorized and
// PaymentCanceled. amount_captured is what was charged; refunds reserve
// against it.
//
// # Transitions
//
// Update locks the attempt row, lets the caller decide on the attempt as it
// is under the lock, checks the edge, updates it conditionally (WHERE status
// = the status it read) and writes the audit row to payment_attempt_events,
// all in the caller's transaction. A transition to SUCCEEDED also enqueues
// the PaymentSucceeded event (outbox.Enqueue) in that transaction, at most
// once per payment (unique (payment_id, type)). Transition is an Update
// whose decision is made in advance. Two paths racing to
// resolve the same attempt (the API's completing transaction and a webhook on
// another pod, say) serialise on the row lock: the second sees the final
// status, applies nothing and writes no audit row.
//
// # Provider key
//
// The provider is called with ProviderKey(attempt id): the same on every
// retry of one payment intent, so the provider deduplicates a repeated call,
// and different for every attempt, so two tenants' equal idempotency keys
// never meet at the provider.
package attempts
