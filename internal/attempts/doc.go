// Package attempts holds the payment attempt: its statuses, the legal edges
// between them, and the one transition function that every path uses (the
// API's create and resume, webhooks, the reconciler and GET ?sync=true).
//
// # State machine
//
//	CREATED ──▶ PENDING ──▶ SUCCEEDED
//	               │    ├─▶ FAILED
//	               │    └─▶ UNKNOWN ──▶ SUCCEEDED | FAILED
//	CREATED ──▶ FAILED   (abandoned: never reached the provider)
//
// CREATED means the attempt and its idempotency key are committed and the
// provider has not been called. PENDING is committed before the first
// provider call, so a crash from then on leaves a PENDING attempt that a
// retry or the reconciler resolves by asking the provider. UNKNOWN means the
// provider may or may not have charged (timeout, 5xx, lost response): it is
// never guessed to be FAILED. SUCCEEDED and FAILED are final: nothing moves
// an attempt out of them; a report that contradicts a final status is
// recorded as an anomaly instead.
//
// # Transitions
//
// Transition locks the attempt row, checks the edge, updates it
// conditionally (WHERE status = the status it read) and writes the audit row
// to payment_attempt_events, all in the caller's transaction. A transition to
// SUCCEEDED also writes the PaymentSucceeded outbox row in that transaction,
// at most once per payment (unique (payment_id, type)). Two paths racing to
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
