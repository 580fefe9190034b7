-- Ownership of a key is decided here, by the primary key: of two racing
-- inserts exactly one returns a row.
-- A key names the payment (attempt_id), the refund (refund_id) or the
-- capture or void (capture_id) or the webhook endpoint (endpoint_id) it created.
-- name: IdemKeyInsert :one
INSERT INTO idempotency_keys (tenant_id, key, fingerprint, attempt_id, refund_id, capture_id, endpoint_id, locked_until, expires_at)
VALUES (
    sqlc.arg(tenant_id), sqlc.arg(key), sqlc.arg(fingerprint), sqlc.narg(attempt_id), sqlc.narg(refund_id), sqlc.narg(capture_id), sqlc.narg(endpoint_id),
    now() + sqlc.arg(lock_ttl_ms)::bigint * interval '1 millisecond',
    now() + sqlc.arg(key_ttl_ms)::bigint * interval '1 millisecond'
)
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING lock_token;

-- The lock is judged by the database clock, never a pod's; so is the time
-- left before the key expires (expires_in_ms, floored at 0), which a pod's
-- replay cache counts from before it sent the read, never past the expiry.
-- name: IdemKeyGet :one
SELECT tenant_id, key, fingerprint, attempt_id, refund_id, capture_id, lock_token, response_code, response_body,
       (locked_until IS NOT NULL AND locked_until > now())::boolean AS locked,
       GREATEST(1, CEIL(EXTRACT(EPOCH FROM (COALESCE(locked_until, now()) - now()))))::integer AS retry_after_seconds,
       GREATEST(0, FLOOR(EXTRACT(EPOCH FROM (expires_at - now())) * 1000))::bigint AS expires_in_ms
FROM idempotency_keys
WHERE tenant_id = $1 AND key = $2;

-- Takeover of an unlocked key with no final response (its owner died, its
-- lock expired, or its attempt is UNKNOWN). Two racing takeovers: the token
-- check lets exactly one win.
-- name: IdemKeyTakeover :one
UPDATE idempotency_keys
SET lock_token   = lock_token + 1,
    locked_until = now() + sqlc.arg(lock_ttl_ms)::bigint * interval '1 millisecond',
    updated_at   = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND key = sqlc.arg(key)
  AND lock_token = sqlc.arg(seen_token)
  AND response_code IS NULL
  AND (locked_until IS NULL OR locked_until <= now())
RETURNING lock_token;

-- name: IdemKeyLockOwned :one
SELECT attempt_id FROM idempotency_keys
WHERE tenant_id = $1 AND key = $2 AND lock_token = $3 AND response_code IS NULL
FOR UPDATE;

-- Renew extends the owner's lock to a whole lock TTL from now, where "now"
-- is the wall clock of the database at this statement (clock_timestamp(),
-- not the transaction's start), so a transaction that waited on locks still
-- grants the full TTL from the moment it runs. Only the owner renews.
-- name: IdemKeyRenew :execrows
UPDATE idempotency_keys
SET locked_until = clock_timestamp() + sqlc.arg(lock_ttl_ms)::bigint * interval '1 millisecond',
    updated_at   = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND key = sqlc.arg(key)
  AND lock_token = sqlc.arg(lock_token) AND response_code IS NULL;

-- IdemKeyRenewNew is IdemKeyRenew for the key a pipelined transaction has
-- just inserted for attempt_id (its token is not known yet): the last
-- statement of that transaction, so that however long the statements
-- before it waited (a row lock of the order guard), the lock lasts a whole
-- TTL from the moment it commits, when the provider call starts.
-- name: IdemKeyRenewNew :execrows
UPDATE idempotency_keys
SET locked_until = clock_timestamp() + sqlc.arg(lock_ttl_ms)::bigint * interval '1 millisecond'
WHERE tenant_id = sqlc.arg(tenant_id) AND key = sqlc.arg(key)
  AND attempt_id = sqlc.arg(attempt_id)::text AND response_code IS NULL;

-- IdemKeyComplete stores the key's final answer; the key expires key_ttl_ms
-- from now, when the answer is stored, not from the key's creation: a
-- payment that stayed UNKNOWN for days still replays for the whole TTL
-- after it resolved.
-- name: IdemKeyComplete :execrows
UPDATE idempotency_keys
SET response_code = sqlc.arg(response_code), response_body = sqlc.arg(response_body), locked_until = NULL, updated_at = now(),
    expires_at = now() + sqlc.arg(key_ttl_ms)::bigint * interval '1 millisecond'
WHERE tenant_id = sqlc.arg(tenant_id) AND key = sqlc.arg(key) AND lock_token = sqlc.arg(lock_token) AND response_code IS NULL;

-- Release gives up ownership without a final response: the key stays
-- resumable. Its expiry counts from now too (gc never deletes the key of an
-- unresolved payment or refund anyway): should its subject become final
-- while this transaction holds the row (a webhook passes a held key over,
-- IdemKeyResolved), the key still lives a whole TTL from then.
-- name: IdemKeyRelease :execrows
UPDATE idempotency_keys
SET locked_until = NULL, updated_at = now(),
    expires_at = now() + sqlc.arg(key_ttl_ms)::bigint * interval '1 millisecond'
WHERE tenant_id = sqlc.arg(tenant_id) AND key = sqlc.arg(key) AND lock_token = sqlc.arg(lock_token) AND response_code IS NULL;

-- IdemKeyResolved starts the expiry of the key of a payment (attempt_id),
-- a refund (refund_id) or a capture or void (capture_id) whose answer became
-- final without it (a webhook):
-- key_ttl_ms from now. A key whose row a request holds right now is passed
-- over (SKIP LOCKED): that request ends its ownership itself (complete or
-- release), which starts the expiry then, and waiting for it here would
-- take the key's row after the subject's, against the lock order.
-- name: IdemKeyResolved :execrows
UPDATE idempotency_keys
SET expires_at = now() + sqlc.arg(key_ttl_ms)::bigint * interval '1 millisecond'
WHERE (tenant_id, key) IN (
    SELECT k.tenant_id, k.key FROM idempotency_keys AS k
    WHERE (k.attempt_id = sqlc.narg(attempt_id)::text OR k.refund_id = sqlc.narg(refund_id)::text
           OR k.capture_id = sqlc.narg(capture_id)::text)
      AND k.response_code IS NULL
    FOR UPDATE SKIP LOCKED
);

-- IdemKeyGetByAttempt, IdemKeyGetByRefund and IdemKeyGetByCapture read
-- what a takeover of the key of a payment, a refund or a capture or void
-- needs, as IdemKeyGet judges it.
-- name: IdemKeyGetByAttempt :one
SELECT tenant_id, key, lock_token,
       (response_code IS NOT NULL)::boolean AS completed,
       (locked_until IS NOT NULL AND locked_until > now())::boolean AS locked
FROM idempotency_keys WHERE attempt_id = $1;

-- name: IdemKeyGetByRefund :one
SELECT tenant_id, key, lock_token,
       (response_code IS NOT NULL)::boolean AS completed,
       (locked_until IS NOT NULL AND locked_until > now())::boolean AS locked
FROM idempotency_keys WHERE refund_id = $1;

-- name: IdemKeyGetByCapture :one
SELECT tenant_id, key, lock_token,
       (response_code IS NOT NULL)::boolean AS completed,
       (locked_until IS NOT NULL AND locked_until > now())::boolean AS locked
FROM idempotency_keys WHERE capture_id = $1;

-- IdemKeyDeleteExpired deletes one batch of expired keys whose payment,
-- refund, capture or void is final (SUCCEEDED, FAILED or CANCELED: nothing
-- can change them any more, so the stored response is all the key still
-- held; an AUTHORIZED payment's key is kept while it is held), or that created
-- a webhook endpoint (stored with its answer, in one transaction). A key of an unresolved one
-- is kept however old, because a retry with it must resume it rather than
-- start a new one. A key a request holds right now is passed over: one whose
-- lock has not expired (its owner may be calling the provider, between
-- transactions), and, by SKIP LOCKED, one a running transaction has locked.
-- name: IdemKeyDeleteExpired :execrows
DELETE FROM idempotency_keys
WHERE (tenant_id, key) IN (
    SELECT k.tenant_id, k.key
    FROM idempotency_keys AS k
    LEFT JOIN payment_attempts AS a ON a.id = k.attempt_id
    LEFT JOIN refunds AS r ON r.id = k.refund_id
    LEFT JOIN captures AS c ON c.id = k.capture_id
    WHERE k.expires_at < now()
      AND (COALESCE(a.status, r.status, c.status) IN ('SUCCEEDED', 'FAILED', 'CANCELED')
           OR (k.endpoint_id IS NOT NULL AND k.response_code IS NOT NULL))
      AND (k.locked_until IS NULL OR k.locked_until <= now())
    ORDER BY k.expires_at
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE OF k SKIP LOCKED
);

-- IdemKeyCompleteMoved is IdemKeyComplete for a transaction that is one
-- round trip: it stores the final response only if this very transaction
-- moved the attempt into status (the attempt's row version is this
-- transaction's: xmin), the body being body_head || the time it set as
-- updated_at (now(), to the second) || body_tail, so the stored payment
-- carries its updated_at as committed. No row: nothing stored (the caller
-- takes the transaction-per-step path). The expiry counts from now, as
-- IdemKeyComplete's.
-- name: IdemKeyCompleteMoved :one
UPDATE idempotency_keys
SET response_code = sqlc.arg(response_code)::integer,
    response_body = convert_to(sqlc.arg(body_head)::text || to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || sqlc.arg(body_tail)::text, 'UTF8'),
    locked_until  = NULL,
    updated_at    = now(),
    expires_at    = now() + sqlc.arg(key_ttl_ms)::bigint * interval '1 millisecond'
WHERE tenant_id = sqlc.arg(tenant_id)::text AND key = sqlc.arg(key)::text
  AND lock_token = sqlc.arg(lock_token)::bigint AND response_code IS NULL
  AND EXISTS (
      SELECT 1 FROM payment_attempts AS a
      WHERE a.id = sqlc.arg(attempt_id)::text AND a.status = sqlc.arg(status)::text AND a.xmin = pg_current_xact_id()::xid
  )
RETURNING response_body;

-- IdemKeyReleaseMoved is IdemKeyRelease under the same condition.
-- name: IdemKeyReleaseMoved :execrows
UPDATE idempotency_keys
SET locked_until = NULL, updated_at = now(),
    expires_at = now() + sqlc.arg(key_ttl_ms)::bigint * interval '1 millisecond'
WHERE tenant_id = sqlc.arg(tenant_id)::text AND key = sqlc.arg(key)::text
  AND lock_token = sqlc.arg(lock_token)::bigint AND response_code IS NULL
  AND EXISTS (
      SELECT 1 FROM payment_attempts AS a
      WHERE a.id = sqlc.arg(attempt_id)::text AND a.status = sqlc.arg(status)::text AND a.xmin = pg_current_xact_id()::xid
  );

