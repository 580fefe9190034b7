// Package providersim is a payment-provider simulator with Stripe-like
// semantics, for development, demos, tests and benchmarks.
//
// It exists to reproduce the failure that motivates paymentsvc: a provider
// that is slow (latency spent before the charge is created, and not cut short
// when the caller hangs up), that fails (error_rate), or whose answer is lost
// after the charge is committed (drop_after_commit). Every charge and refund
// call carries an Idempotency-Key; the first answer given under a key is
// stored and replayed verbatim (header Idempotent-Replayed: true) to every
// later call with the same key and the same parameters, so a client that
// retries with its key is never charged twice. A key reused with different
// parameters is refused with idempotency_error. Lookups by key, by id and by
// creation window let a reconciler learn what happened to a lost call.
//
// All state sits behind one mutex, and the whole of it is rewritten atomically
// to the state file (when configured) before a mutation is answered, so
// whatever a client was told survives a restart. New charges and refunds emit
// signed webhooks, delivered asynchronously with bounded exponential backoff.
//
// Details the contract leaves open, decided here:
//   - stats.charge_calls counts every authenticated POST /v1/charges, whatever
//     its outcome (invalid, faulted, replayed, dropped).
//   - A replay returns the bytes of the first answer; the current state of a
//     charge (e.g. refunded) is read with GET /v1/charges?idempotency_key=K
//     or GET /v1/charges/{id}.
//   - Refusals (400, 404) are not stored under the key, since nothing was
//     done; success and the 402 decline are.
//   - GET /v1/charges also accepts ?reference=R, alone or with the window
//     bounds (each optional), so a reconciler can find charges by reference.
//   - The state file is rewritten for every new charge or refund and on
//     Close; counters changed in between (charge_calls, webhooks_sent) reach
//     the file with the next write.
package providersim
