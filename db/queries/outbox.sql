-- OutboxInsert is the one way a row gets into the outbox (outbox.Enqueue),
-- in the transaction that makes the change the event reports.
-- name: OutboxInsert :exec
INSERT INTO outbox (id, type, subject, subject_id, payment_id, payload, traceparent)
VALUES ($1, $2, $3, $4, $5, $6, sqlc.narg(traceparent))
ON CONFLICT (subject_id, type) DO NOTHING;

-- Wakes the outbox relays (LISTEN outbox) when the transaction commits.
-- name: OutboxNotify :exec
SELECT pg_notify('outbox', '');

-- OutboxClaim locks a batch of due rows for the caller's transaction; SKIP
-- LOCKED lets concurrent relays take disjoint batches instead of queueing
-- behind each other. A row never tried has next_attempt_at = created_at (both
-- default to the inserting transaction's now()), so this order is oldest first
-- for fresh rows and follows outbox_unpublished_idx without a sort; rows that
-- failed wait their backoff instead of blocking the head of the queue.
-- name: OutboxClaim :many
SELECT id, type, subject, payment_id, payload, created_at, publish_attempts, traceparent
FROM outbox
WHERE published_at IS NULL AND next_attempt_at <= now()
ORDER BY next_attempt_at, created_at, id
LIMIT sqlc.arg(max_rows)
FOR UPDATE SKIP LOCKED;

-- OutboxBoundIdle makes the server end this session, and with it the
-- transaction and its claim's row locks, once the transaction has sat idle
-- for timeout_ms (SET LOCAL: for this transaction only). A relay that went
-- silent mid-batch (its node lost power or its network: no FIN, no RST)
-- would otherwise keep its rows locked, and every other relay skipping them,
-- until the server's TCP keepalive gave up on it, hours later and far
-- outside the stream's duplicate window.
-- name: OutboxBoundIdle :exec
SELECT set_config('idle_in_transaction_session_timeout', sqlc.arg(timeout_ms)::bigint::text, true);

-- OutboxMarkPublished marks each row published when JetStream acknowledged
-- it, on the database clock: this statement's clock_timestamp() less how
-- long ago the relay got the row's PubAck (ack_ages_ms, zipped with ids).
-- Not the transaction's now(), which is when the batch was claimed, before
-- anything was sent.
-- name: OutboxMarkPublished :execrows
UPDATE outbox AS o
SET published_at = clock_timestamp() - a.ack_age_ms * interval '1 millisecond', last_error = NULL
FROM (
    SELECT unnest(sqlc.arg(ids)::text[]) AS id,
           unnest(sqlc.arg(ack_ages_ms)::bigint[]) AS ack_age_ms
) AS a
WHERE o.id = a.id AND o.published_at IS NULL;

-- OutboxMarkFailed records one failed publish per row and schedules the next
-- try delay_ms from now; the delays (with jitter) are chosen by the caller.
-- name: OutboxMarkFailed :execrows
UPDATE outbox AS o
SET publish_attempts = o.publish_attempts + 1,
    last_error       = f.error,
    next_attempt_at  = now() + f.delay_ms * interval '1 millisecond'
FROM (
    -- Set-returning functions in one select list advance in lockstep, so this
    -- zips the three arrays (sqlc cannot type the multi-argument unnest).
    SELECT unnest(sqlc.arg(ids)::text[]) AS id,
           unnest(sqlc.arg(errors)::text[]) AS error,
           unnest(sqlc.arg(delays_ms)::bigint[]) AS delay_ms
) AS f
WHERE o.id = f.id AND o.published_at IS NULL;

-- name: OutboxStats :one
SELECT count(*)::bigint AS pending,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_seconds
FROM outbox
WHERE published_at IS NULL;

-- OutboxListen subscribes the session to the wake-ups that OutboxNotify
-- sends when a transaction writing outbox rows through outbox.Enqueue
-- commits, and that outbox.Notify sends for a pod without a relay.
-- name: OutboxListen :exec
LISTEN outbox;

-- OutboxDeletePublishedBefore deletes one batch of rows published more than
-- age_ms ago (by the database clock), oldest first. An unpublished row is
-- never deleted, however old: it is an event still owed to the stream.
-- name: OutboxDeletePublishedBefore :execrows
DELETE FROM outbox
WHERE id IN (
    SELECT id
    FROM outbox
    WHERE published_at IS NOT NULL
      AND published_at < now() - sqlc.arg(age_ms)::bigint * interval '1 millisecond'
    ORDER BY published_at
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE SKIP LOCKED
);

-- OutboxInsertMoved is OutboxInsert for a transaction that is one round
-- trip: the event of a payment is inserted only if this very transaction
-- moved the payment into status (the payment's row version is this
-- transaction's: xmin), and its payload is payload_head || the time it set
-- as updated_at (now(), to the second) || payload_tail, so the event
-- carries the payment's updated_at as committed. It returns how many rows
-- it inserted (0 or 1). It sends no NOTIFY: each notifying commit takes a
-- cluster-wide lock that serialises every other one, and this is the
-- create path's commit; the caller wakes its own relay after the commit
-- instead (outbox.Wakeup).
-- name: OutboxInsertMoved :one
WITH ins AS (
    INSERT INTO outbox (id, type, subject, subject_id, payment_id, payload, traceparent)
    SELECT sqlc.arg(id)::text, sqlc.arg(type)::text, sqlc.arg(subject)::text, sqlc.arg(payment_id)::text, sqlc.arg(payment_id)::text,
           (sqlc.arg(payload_head)::text || to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || sqlc.arg(payload_tail)::text)::jsonb,
           sqlc.narg(traceparent)::text
    WHERE EXISTS (
        SELECT 1 FROM payment_attempts AS a
        WHERE a.id = sqlc.arg(payment_id)::text AND a.status = sqlc.arg(status)::text AND a.xmin = pg_current_xact_id()::xid
    )
    ON CONFLICT (subject_id, type) DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM ins;

-- OutboxListByPayment is every event written for a payment and its refunds,
-- oldest first, with whether it was published (the console's payment page).
-- name: OutboxListByPayment :many
SELECT id, type, subject, subject_id, created_at, published_at, publish_attempts, last_error
FROM outbox
WHERE payment_id = $1
ORDER BY created_at, id;
