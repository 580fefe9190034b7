// Package client is the Go client of the payments service (paymentsvc): the
// way a checkout charges a customer exactly once, however often its calls
// time out, its pods crash or the service answers "not yet".
//
// # The one rule: one idempotency key per intent
//
// A payment intent (this order, this amount, this card) gets one
// Idempotency-Key, and every try of it, in this process or after a restart,
// sends that key with the same request. The service charges at most once per
// key. So:
//
//  1. Mint the key with NewKey (or derive it from your own intent id) and
//     store it with the intent, in the order row, before the first try.
//  2. Call CreatePayment with the stored key. It retries by itself, always
//     with that key, until the payment is final or its deadline passes.
//  3. On a *NotFinalError (deadline, cancellation), keep the key: call
//     CreatePayment again later with the same key and request (it resumes
//     the payment and never charges twice), or read it with SyncPayment.
//     Never mint a new key because a call timed out: that is how customers
//     get charged twice.
//
// A new key is right only for a new intent: another order, or another
// attempt after a FAILED payment (a declined card).
//
// # Retries
//
// A call retries, with the same key and body, on: no answer (connection
// refused or reset, Config.TryTimeout passed), 409 idempotency_key_in_use
// (another try of the same key is still running: after its Retry-After),
// 429 and 503 (after Retry-After), every 5xx, any answer that is not a
// problem document (a proxy's error page), and a 202 (the payment is
// UNKNOWN: trying again with the same key resumes it). It waits a jittered
// exponential backoff between tries (Config.MinBackoff to MaxBackoff), or
// the Retry-After when that is longer, and sends each try to the next of
// Config.URLs. It never retries a refusal that retrying cannot change: 400,
// 401, 404, 409 order_already_has_payment or payment_not_refundable, 413,
// 415, 422; those come back as a *Problem.
//
// Config.TryTimeout bounds one HTTP request, Config.Timeout (or the
// context's deadline, if earlier) the whole call. When the call ends before
// a final answer it returns a *NotFinalError that carries the key and the
// last state the service reported. Calls start no goroutines of their own
// and return as soon as their context ends.
//
// # Errors
//
//   - *Problem: the service refused (Code, Status, Detail, PaymentID,
//     RetryAfter); CodeOf(err) extracts the code.
//   - *NotFinalError: no final answer in time; IdempotencyKey and Payment
//     (or Refund) say what to resume. errors.Is(err,
//     context.DeadlineExceeded) holds when the deadline ended it. Its Last
//     is the last try's failure: a *TransportError (no answer), a
//     *Problem that was being retried, or an *UnexpectedAnswerError.
//   - ErrMissingKey: a create called without a key; nothing was sent.
//
// A FAILED payment (a declined card) is not an error: CreatePayment returns
// it with Status FAILED and its FailureCode.
//
// The types follow api/openapi.yaml, field for field; a test of this
// package fails when they drift apart.
package client
