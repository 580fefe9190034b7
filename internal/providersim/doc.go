// Package providersim is a payment-provider simulator with Stripe-like
// semantics, for development, demos, tests and benchmarks.
//
// It exists to reproduce the failure that motivates paymentsvc: a provider
// that is slow (latency spent before the charge or refund is created, and not
// cut short when the caller hangs up), that fails (error_rate), or whose
// answer is lost after the work is committed (drop_after_commit). Every
// charge and refund call carries an Idempotency-Key; the first answer given
// under a key is stored and replayed verbatim (header Idempotent-Replayed:
// true) to every later call with the same key and the same parameters, so a
// client that retries with its key is never charged or refunded twice. A key
// reused with different parameters is refused with idempotency_error.
// Lookups by key, by id and by creation window let a reconciler learn what
// happened to a lost call.
//
// Refunds (POST /v1/refunds, body {"charge":…,"amount":N,"reference":…},
// amount and reference optional) may be partial: a charge's amount_refunded
// is the sum of its refunds, and refunded becomes true once that reaches the
// charge's amount. A refund of more than the unrefunded rest answers 400
// amount_too_large, a refund of a charge that did not succeed 400
// charge_not_refundable, of an unknown charge 404 resource_missing. Each
// refund emits refund.succeeded (data.refund) and charge.refunded (data.charge,
// the charge as the refund left it).
//
// A charge made with "capture":false is only authorized: status
// authorized, amount_capturable its amount, capture_before its creation
// plus SIM_AUTH_TTL (default 168h). POST /v1/charges/{id}/capture
// ({"amount":N,"reference":…}, both optional) takes the money (succeeded,
// captured, amount_captured N; a partial capture releases the rest),
// POST /v1/charges/{id}/void releases it (voided); both are idempotent like
// charges, answer 200 with the charge, and refuse (400, not stored)
// amount_too_large, charge_already_captured, charge_not_capturable (voided,
// failed or charged at once) and authorization_expired. An authorization
// expires (status expired) once capture_before passes, at the latest when
// the state is next read, or at once by POST /_sim/charges/{id}/expire.
// GET /v1/captures?idempotency_key=K and GET /v1/voids?idempotency_key=K
// find what a key did. Every charge carries captured and amount_captured
// (what moved), capture_key and void_key; a charge's refunds are limited to
// its amount_captured. Webhooks: charge.authorized (instead of
// charge.succeeded for a new authorization), charge.captured,
// charge.voided, charge.expired.
//
// Faults (PUT /_sim/faults) apply to charge calls, to refund calls too when
// the fault set says "refunds":true, and to capture and void calls too when
// it says "captures":true; lookups are never faulted.
//
// All state sits behind one mutex, and the whole of it is rewritten atomically
// to the state file (when configured) before a mutation is answered, so
// whatever a client was told survives a restart. New charges and refunds emit
// signed webhooks, delivered asynchronously with bounded exponential backoff.
//
// Details a Stripe-like API leaves open, decided here:
//   - stats.charge_calls, refund_calls, capture_calls and void_calls count
//     every authenticated POST /v1/charges, POST /v1/refunds,
//     POST /v1/charges/{id}/capture and /void, whatever its outcome
//     (invalid, refused, faulted, replayed, dropped).
//   - A capture or void request is compared as sent, like a refund's: an
//     omitted amount and the same amount spelled out are different
//     requests under one key. A void with an amount is invalid.
//   - A capture's refusals are checked in this order: unknown charge (404),
//     already captured, expired, not capturable, then the amount.
//   - POST /_sim/charges/{id}/expire answers the charge (200; an expired one
//     as it is), 404 for an unknown one, 400 charge_not_capturable for one
//     that is not authorized. POST /_sim/charges imports authorized (with
//     capture_before), voided and expired charges too.
//   - A replay returns the bytes of the first answer; the current state of a
//     charge (e.g. amount_refunded) is read with
//     GET /v1/charges?idempotency_key=K or GET /v1/charges/{id}.
//   - Refusals (400, 404, and error_rate faults) are not stored under the
//     key, since nothing was done: the same key may be used again, with the
//     same or another body. Success and the 402 decline are stored.
//   - A refund request is compared as it was sent: an omitted amount and the
//     same amount spelled out are different requests under one key (the
//     first means "the rest", whatever the rest is when it is made). An
//     omitted reference and "" are the same.
//   - amount_too_large also answers a refund of a charge with nothing left to
//     refund (refunded: true), with or without an amount: the former
//     charge_already_refunded code is no longer answered. A client that must
//     tell "already wholly refunded" apart reads the charge's refunded field.
//   - The checks of a refund run in this order: Idempotency-Key present, body
//     valid (charge a non-empty string, amount a positive integer when
//     given), error_rate fault, latency, key replay or idempotency_error,
//     unknown charge, charge not succeeded, amount against the rest.
//   - A refund has the charge's currency, and its reference is "" when none
//     was given (like a charge's).
//   - GET /v1/refunds without idempotency_key answers {"data":[…],
//     "has_more":false} with every refund matching the optional ?charge=ch_…
//     and ?reference=R; GET /v1/refunds/{id} answers one refund.
//   - SIM_LATENCY delays charge calls only (docs/configuration.md); the
//     startup fault set DELETE /_sim/faults restores has "refunds":false.
//   - POST /_sim/charges takes amount_refunded too ("refunded":true alone
//     means the whole amount) and makes no refund records for it.
//   - The state file is rewritten for every new charge or refund and on
//     Close; counters changed in between (charge_calls, refund_calls,
//     webhooks_sent) reach the file with the next write. A file written
//     before partial refunds loads: a charge's "refunded":true becomes
//     amount_refunded = amount, a refund takes its charge's currency, and a
//     refund key's request is {"charge":C}, which is what was sent then.
package providersim
