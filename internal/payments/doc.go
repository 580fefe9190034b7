// Package payments is the create-payment use case and the resolution of
// unresolved attempts.
//
// Create: acquire the Idempotency-Key (a new key commits its CREATED attempt
// in the same transaction) → commit PENDING → call the provider on a context
// detached from the client's, with the key derived from the attempt → one
// transaction that, only while this request still holds the key's lock
// token, moves the attempt to SUCCEEDED or FAILED (audit and outbox rows
// included) and stores the key's final response. An unknown outcome moves the
// attempt to UNKNOWN and unlocks the key without a response, so a retry with
// the same key resumes it.
//
// A request that takes a key over resumes from the attempt's status, which is
// the recovery point: CREATED, PENDING or UNKNOWN call the provider again
// with the same derived key (the provider deduplicates, so a retry never
// makes a second charge); SUCCEEDED or FAILED store and answer the final
// response without calling anything.
//
// Sync resolves an unresolved attempt by asking the provider what it has
// under the derived key, holding the key's lock the way a retrying request
// would; the reconciler and GET ?sync=true use it.
//
// A manual payment (capture_method manual) is only authorized: AUTHORIZED
// answers its create for good (201, stored on the key), and it is then
// captured or voided by an operation on it (Capture, Void). Refunds,
// captures and voids are operations on a payment that run the same flow
// (operation.go), each kind supplying its table, its provider call and what
// the provider's answer means. CheckHeld learns what the provider shows of
// an AUTHORIZED payment (a capture, void or expiry made there), fenced by
// the payment's row lock and its live capture or void rather than by its
// key (see docs/architecture.md).
package payments
