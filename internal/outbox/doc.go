// Package outbox relays the transactional outbox to NATS JetStream.
//
// A transaction that makes a payment SUCCEEDED also inserts a
// PaymentSucceeded row into the outbox table (see internal/attempts), so the
// event exists exactly when the state change does. A Relay, one per pod,
// turns rows into messages on JetStream stream PAYMENTS, subject
// payments.succeeded (docs/operations.md, "Events"), as CloudEvents 1.0 JSON envelopes.
//
// The protocol, per batch and in one transaction:
//
//  1. Claim up to BatchSize due rows (published_at IS NULL, next_attempt_at
//     reached) with FOR UPDATE SKIP LOCKED. Concurrent relays skip each
//     other's rows, so no row is published by two relays at once.
//  2. Publish each row with header Nats-Msg-Id = the row's id, then wait for
//     the PubAcks. JetStream stores the message before it acknowledges it.
//  3. Mark the acknowledged rows published; for the rest, count the attempt,
//     keep the error and push next_attempt_at out with jittered backoff.
//  4. Commit.
//
// A relay that dies between 2 and 4 leaves its rows unmarked, and Postgres
// releases their locks: at once if its connection closes, and at the latest
// once its transaction has been idle for BatchTimeout if it went silent (a
// node that lost power or its network); another relay publishes them again with the same
// Nats-Msg-Id, and JetStream drops the copy inside the stream's duplicate
// window (at least MinDuplicateWindow). Consumers still get at-least-once
// delivery and dedupe on the CloudEvents id, which is the same outbox id.
//
// Relays wake on NOTIFY outbox (sent by Enqueue's transactions at commit)
// and on their own process's Wakeup (the create path, which sends no
// NOTIFY: see Wakeup), and poll every PollInterval as a fallback. While NATS is unreachable a relay claims nothing and waits for
// the client to reconnect; rows simply stay in the table.
package outbox
