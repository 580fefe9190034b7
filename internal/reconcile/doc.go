// Package reconcile is the reconciler job (cmd/reconciler): one-shot runs,
// started from cron, that make our records and the provider's agree.
//
// Run resolves attempts left CREATED, PENDING or UNKNOWN. It claims due
// attempts in batches with SELECT … FOR UPDATE SKIP LOCKED and, in the same
// statement, pushes each claimed attempt's next_check_at out by a lease, so a
// second reconciler started meanwhile (overlapping cron runs) neither waits
// for the batch nor picks it up after the claim commits. Each claimed attempt
// is then resolved by payments.Service.Sync, which holds the attempt's
// idempotency key lock the way a retrying request would: the lease keeps two
// reconcilers from doing the same work, the key lock keeps anyone from
// resolving an attempt twice. An attempt still unresolved afterwards gets its
// next check from a backoff schedule (2m, 10m, 1h, 6h, 24h, each ±20%); once
// the schedule is spent it is flagged needs_review for a human and checked
// daily from then on.
//
// Settle compares the provider's charges of one UTC day with our attempts,
// refunds orphan charges (no attempt, or a FAILED one) under a refund key
// derived from the charge, and records anomalies for what a human must see.
//
// GC deletes, in bounded batches, expired idempotency keys of final
// attempts, webhook events older than their TTL and published outbox rows
// older than their retention (through the webhook and outbox packages,
// which own those tables).
package reconcile
