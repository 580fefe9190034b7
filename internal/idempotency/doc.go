// Package idempotency implements the Idempotency-Key protocol of
// POST /v1/payments: key parsing, the request fingerprint, and acquiring,
// taking over, completing and releasing a key in PostgreSQL.
//
// # Protocol
//
// A key is owned by whoever inserts its row: INSERT … ON CONFLICT DO NOTHING
// RETURNING decides among racing requests on any number of pods, never a
// select-then-insert. The new key's attempt is inserted in the same
// transaction, so a key never exists without its attempt.
//
// A request that finds the key already there compares fingerprints (method,
// route and canonical JSON body): a different request is refused (422). A
// stored final response is replayed. A key locked by a live owner
// (locked_until in the future, by the database clock) answers 409 with
// Retry-After. An unlocked key without a final response (its owner died and
// its lock expired, or its attempt is UNKNOWN, or the provider was
// unavailable) is taken over with a conditional UPDATE that bumps lock_token:
// of two racing takeovers exactly one matches the token it read.
//
// Every write an owner makes afterwards (complete, release) is conditional
// on its lock_token, so an owner that lost its lock writes nothing.
//
// # Expiry
//
// A key is kept for the owner's KeyTTL from the moment its final answer is
// stored (Complete, QueueCompleteMoved; the rule is Lock.keyTTLms), not from
// its creation: a payment that stayed UNKNOWN for days still replays for the
// whole TTL after it resolved. A payment or refund a webhook makes final
// without its key starts the key's expiry the same way (ResolvedAttempt,
// ResolvedRefund). DeleteExpired (reconciler gc) then deletes keys past
// their expiry whose payment or refund is final, never a held one.
package idempotency
