// Package delivery pushes a tenant's events to its own HTTP endpoints, the
// merchant webhooks, signed as the Standard Webhooks specification says. It
// is a consumer of the outbox's events, never a path of the money flow: it
// reads no payment, refund or attempt, and nothing of a payment waits for it.
// (internal/webhook is the other direction: the providers' webhooks coming in.)
//
// It owns webhook_endpoints and their audit (webhook_endpoint_events),
// webhook_messages (each event's body, once), webhook_deliveries (one event
// to one endpoint: the queue and its log) and their audit
// (webhook_delivery_events, one row per attempt and per other change).
//
// # From event to delivery
//
// The outbox relay calls NewFanout's hook in the transaction that marks a
// batch published (outbox.Config.Fanout). One INSERT … SELECT makes a pending
// delivery for each live endpoint of the event's tenant that subscribes to
// its type and was created no later than the event, ON CONFLICT (endpoint,
// event) DO NOTHING. The relay's batch is exclusive (SKIP LOCKED) and the
// deliveries commit with the marks or not at all, so each event fans out
// once, durably, at no cost to the request that made it. What holds the
// relay back (OUTBOX_RELAY=off, NATS down) holds the deliveries back with it:
// late, never lost.
//
// # The queue
//
// A Deliverer runs in every pod. It claims due deliveries (status pending,
// next_attempt_at reached) with FOR UPDATE SKIP LOCKED, oldest first, in
// batches, and a claim is a lease: it moves next_attempt_at past the time its
// attempts may take and bumps lease. A pod that dies holding deliveries
// needs no one to clean up: the lease lapses and the deliveries are due again
// for every pod. A result is written with the lease it was claimed under;
// one of a superseded claim (a manual retry, a lease that lapsed) counts as an
// attempt but moves nothing, except a 2xx, which delivers whatever the claim.
// Results are written in batches, each attempt with its audit row.
//
// # Isolation
//
// A pod holds at most Concurrency deliveries, and of one endpoint at most
// EndpointConcurrency attempts in flight; it holds queueFactor rounds of them
// for an endpoint that answers fast (so a backlog drains in big batches) and
// one round for one that was slow, so an endpoint that hangs ties up
// EndpointConcurrency of the pod's Concurrency, each for one Timeout, and the
// claims skip it while it does. Every stage of an attempt has a deadline
// (connect, TLS, response headers, the whole attempt); redirects are
// answers, never followed; at most maxAnswerBytes of an answer is read.
//
// # Addresses
//
// The dialler checks the address it is about to connect to (a net.Dialer
// Control hook), after name resolution: loopback, private, link-local,
// shared, unspecified, multicast and the other special-purpose ranges are
// refused unless AllowPrivate, so DNS cannot point a public name inside. No
// proxy is taken from the environment, and certificates are always verified.
//
// # Retries and signatures
//
// Anything but a 2xx within Timeout is retried after each delay of Schedule,
// then the delivery is failed; a refused address fails it at once. Every
// attempt carries the same webhook-id (the event id) and its own
// webhook-timestamp, and webhook-signature signs "id.timestamp.body" with the
// endpoint's secret, and during the 24 hours after a rotation with the one it
// replaced too.
package delivery
