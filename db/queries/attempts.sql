-- name: AttemptInsert :one
INSERT INTO payment_attempts (
    id, tenant_id, order_id, idempotency_key, amount, currency,
    payment_method, description, metadata, status, route, capture_method
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, $9, 'CREATED', $10, $11
)
RETURNING *;

-- name: AttemptGetByID :one
SELECT * FROM payment_attempts WHERE id = $1;

-- name: AttemptGetForTenant :one
SELECT * FROM payment_attempts WHERE tenant_id = $1 AND id = $2;

-- name: AttemptGetByChargeID :one
SELECT * FROM payment_attempts WHERE provider_charge_id = $1;

-- name: AttemptListByOrder :many
SELECT * FROM payment_attempts
WHERE tenant_id = $1 AND order_id = $2
ORDER BY created_at, id;

-- The order's payment that holds it (payment_attempts_live_order_key).
-- name: AttemptGetLiveForOrder :one
SELECT * FROM payment_attempts
WHERE tenant_id = $1 AND order_id = $2 AND status NOT IN ('FAILED', 'CANCELED');

-- name: AttemptGetForUpdate :one
SELECT * FROM payment_attempts WHERE id = $1 FOR UPDATE;

-- Transition moves an attempt only if it is still in the status the caller
-- read, so two racing writers cannot both win; the caller writes the audit
-- row in the same transaction when a row comes back.
-- A transition to PENDING names the provider about to be called: it is
-- committed before the call. Back to CREATED (not_sent: nothing reached
-- it), the payment is at no provider again. Otherwise it stays as it is.
-- SUCCEEDED records what was captured (amount_captured; an automatic
-- payment's amount), AUTHORIZED the provider's deadline (capture_before,
-- kept only while AUTHORIZED), CANCELED its reason.
-- name: AttemptTransition :one
UPDATE payment_attempts
SET status             = sqlc.arg(to_status),
    provider           = CASE WHEN sqlc.arg(to_status) = 'CREATED' THEN NULL
                              ELSE COALESCE(sqlc.narg(provider), provider) END,
    provider_charge_id = COALESCE(sqlc.narg(provider_charge_id), provider_charge_id),
    failure_code       = COALESCE(sqlc.narg(failure_code), failure_code),
    amount_captured    = CASE WHEN sqlc.arg(to_status) = 'SUCCEEDED'
                              THEN COALESCE(sqlc.narg(amount_captured)::bigint, amount) ELSE amount_captured END,
    capture_before     = CASE WHEN sqlc.arg(to_status) = 'AUTHORIZED' THEN sqlc.narg(capture_before)::timestamptz END,
    canceled_reason    = CASE WHEN sqlc.arg(to_status) = 'CANCELED' THEN sqlc.narg(canceled_reason)::text
                              ELSE canceled_reason END,
    updated_at         = now()
WHERE id = sqlc.arg(id) AND status = sqlc.arg(from_status)
RETURNING *;

-- Touch records that the provider is about to be called again for an
-- unresolved attempt, so that the reconciler's "no call can still land"
-- window starts over.
-- name: AttemptTouch :exec
UPDATE payment_attempts SET updated_at = now()
WHERE id = $1 AND status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- name: AttemptEventInsert :exec
INSERT INTO payment_attempt_events (attempt_id, from_status, to_status, source, reason)
VALUES ($1, $2, $3, $4, $5);

-- name: AttemptEventList :many
SELECT * FROM payment_attempt_events WHERE attempt_id = $1 ORDER BY id;

-- QuietFor reports, by the database clock, whether the attempt has not
-- changed (no transition, no provider call) for at least quiet_ms.
-- name: AttemptQuietFor :one
SELECT (updated_at < now() - sqlc.arg(quiet_ms)::bigint * interval '1 millisecond')::boolean AS quiet
FROM payment_attempts WHERE id = sqlc.arg(id);

-- name: AnomalyInsert :exec
INSERT INTO anomalies (kind, attempt_id, charge_id, source, detail, dedupe_key)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (dedupe_key) DO NOTHING;

-- AttemptBacklogByStatus summarises the unresolved attempts per status: how
-- many, how many a human must look at (needs_review is only ever set on
-- unresolved attempts), and how long ago the oldest was created. The status
-- list repeats payment_attempts_unresolved_idx, so it reads the backlog, not
-- the table. Statuses without attempts are absent. Run on every scrape of
-- /metrics (internal/attempts/backlog.go, internal/metrics/dbcollector.go).
-- name: AttemptBacklogByStatus :many
SELECT status,
       count(*)::bigint                                         AS unresolved,
       count(*) FILTER (WHERE needs_review)::bigint             AS needs_review,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_seconds
FROM payment_attempts
WHERE status IN ('CREATED', 'PENDING', 'UNKNOWN')
GROUP BY status;

-- name: AttemptGetForTenantForUpdate :one
SELECT * FROM payment_attempts WHERE tenant_id = $1 AND id = $2 FOR UPDATE;

-- AttemptReserveRefund adds a refund's amount to the payment's reserved
-- amount; the guard repeats the check made on the locked row, so that no
-- path can reserve more than the payment's amount.
-- name: AttemptReserveRefund :execrows
UPDATE payment_attempts
SET amount_reserved = amount_reserved + sqlc.arg(amount)::bigint, updated_at = now()
WHERE id = sqlc.arg(id) AND status = 'SUCCEEDED'
  AND amount_reserved + sqlc.arg(amount)::bigint <= amount_captured;

-- AttemptReleaseRefund gives a FAILED refund's amount back and returns the
-- payment's amount_refunded; no row when less is reserved.
-- name: AttemptReleaseRefund :one
UPDATE payment_attempts
SET amount_reserved = amount_reserved - sqlc.arg(amount)::bigint, updated_at = now()
WHERE id = sqlc.arg(id) AND amount_reserved >= sqlc.arg(amount)::bigint
RETURNING amount_refunded;

-- AttemptAddRefunded counts a SUCCEEDED refund's amount as refunded and
-- returns the payment's amount_refunded afterwards; no row when more than
-- is reserved.
-- name: AttemptAddRefunded :one
UPDATE payment_attempts
SET amount_refunded = amount_refunded + sqlc.arg(amount)::bigint, updated_at = now()
WHERE id = sqlc.arg(id) AND amount_refunded + sqlc.arg(amount)::bigint <= amount_reserved
RETURNING amount_refunded;

-- AttemptListPage is one page of a tenant's payments, newest first (equal
-- created_at by id, descending), optionally of one order, after the cursor
-- (after_created_at, after_id) when has_cursor; keyset on
-- payment_attempts_tenant_created_idx / payment_attempts_tenant_order_idx.
-- name: AttemptListPage :many
SELECT * FROM payment_attempts
WHERE tenant_id = sqlc.arg(tenant_id)
  AND (sqlc.narg(order_id)::text IS NULL OR order_id = sqlc.narg(order_id)::text)
  AND (NOT sqlc.arg(has_cursor)::boolean
       OR (created_at, id) < (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::text))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows);

-- AttemptInsertCalling is the create path's acquisition and CREATED →
-- PENDING in one commit: it inserts the attempt of the key this very
-- transaction inserted (the EXISTS: a key another request owns inserts
-- nothing) directly in PENDING at the provider about to be called, with
-- both audit rows, CREATED then PENDING.
-- name: AttemptInsertCalling :one
WITH ins AS (
    INSERT INTO payment_attempts (
        id, tenant_id, order_id, idempotency_key, amount, currency,
        payment_method, description, metadata, status, provider, route, capture_method
    )
    SELECT sqlc.arg(id)::text, sqlc.arg(tenant_id)::text, sqlc.arg(order_id)::text, sqlc.arg(idempotency_key)::text,
           sqlc.arg(amount)::bigint, sqlc.arg(currency)::text, sqlc.arg(payment_method)::text,
           sqlc.narg(description)::text, sqlc.narg(metadata)::jsonb, 'PENDING', sqlc.arg(provider)::text, sqlc.arg(route)::text[],
           sqlc.arg(capture_method)::text
    WHERE EXISTS (
        SELECT 1 FROM idempotency_keys AS k
        WHERE k.tenant_id = sqlc.arg(tenant_id)::text AND k.key = sqlc.arg(idempotency_key)::text
          AND k.attempt_id = sqlc.arg(id)::text
    )
    RETURNING *
), audit AS (
    INSERT INTO payment_attempt_events (attempt_id, from_status, to_status, source, reason)
    SELECT ins.id, s.from_status, s.to_status, 'api', s.reason
    FROM ins, (VALUES (1, NULL::text, 'CREATED', 'created'),
                      (2, 'CREATED', 'PENDING', 'calling provider ' || sqlc.arg(provider)::text)) AS s (n, from_status, to_status, reason)
    ORDER BY s.n
)
SELECT * FROM ins;

-- AttemptFinish is the create path's completing transition in one
-- statement: it moves the attempt from the status this request left it in,
-- only while the request still owns its key (the EXISTS locks the key row,
-- as Hold does), and writes the audit row. No row: someone else moved it,
-- or the key was taken over; the caller then takes the slow path.
-- It records what AttemptTransition records of a SUCCEEDED or AUTHORIZED
-- payment (a create never makes one CANCELED on this path).
-- name: AttemptFinish :one
WITH moved AS (
    UPDATE payment_attempts
    SET status             = sqlc.arg(to_status)::text,
        provider_charge_id = COALESCE(sqlc.narg(provider_charge_id)::text, provider_charge_id),
        failure_code       = COALESCE(sqlc.narg(failure_code)::text, failure_code),
        amount_captured    = CASE WHEN sqlc.arg(to_status)::text = 'SUCCEEDED'
                                  THEN COALESCE(sqlc.narg(amount_captured)::bigint, amount) ELSE amount_captured END,
        capture_before     = CASE WHEN sqlc.arg(to_status)::text = 'AUTHORIZED' THEN sqlc.narg(capture_before)::timestamptz END,
        updated_at         = now()
    WHERE id = sqlc.arg(id)::text AND status = sqlc.arg(from_status)::text
      AND EXISTS (
          SELECT 1 FROM idempotency_keys AS k
          WHERE k.tenant_id = sqlc.arg(tenant_id)::text AND k.key = sqlc.arg(key)::text
            AND k.lock_token = sqlc.arg(lock_token)::bigint AND k.response_code IS NULL
          FOR UPDATE
      )
    RETURNING *
), audit AS (
    INSERT INTO payment_attempt_events (attempt_id, from_status, to_status, source, reason)
    SELECT moved.id, sqlc.arg(from_status)::text, sqlc.arg(to_status)::text, 'api', sqlc.arg(reason)::text FROM moved
)
SELECT * FROM moved;

-- The console's reads (internal/attempts/console.go).

-- AttemptCountByStatusSince counts the payments created since since_ms ago,
-- per status (statuses without payments are absent); a range of
-- payment_attempts_created_idx.
-- name: AttemptCountByStatusSince :many
SELECT status, count(*)::bigint AS n
FROM payment_attempts
WHERE created_at > now() - sqlc.arg(since_ms)::bigint * interval '1 millisecond'
GROUP BY status;

-- AttemptHourlyByStatus counts the payments created since since_ms ago per
-- hour of creation (UTC) and status.
-- name: AttemptHourlyByStatus :many
SELECT date_trunc('hour', created_at, 'UTC')::timestamptz AS hour, status, count(*)::bigint AS n
FROM payment_attempts
WHERE created_at > now() - sqlc.arg(since_ms)::bigint * interval '1 millisecond'
GROUP BY 1, 2
ORDER BY 1, 2;

-- AttemptSearchPage is one page of every tenant's payments, newest first
-- (keyset on payment_attempts_created_idx), optionally of one status and
-- one tenant, and optionally only those whose id, order id or provider
-- charge id is q exactly.
-- name: AttemptSearchPage :many
SELECT * FROM payment_attempts
WHERE (sqlc.narg(status)::text IS NULL OR status = sqlc.narg(status)::text)
  AND (sqlc.narg(tenant_id)::text IS NULL OR tenant_id = sqlc.narg(tenant_id)::text)
  AND (sqlc.narg(q)::text IS NULL
       OR id = sqlc.narg(q)::text OR order_id = sqlc.narg(q)::text OR provider_charge_id = sqlc.narg(q)::text)
  AND (NOT sqlc.arg(has_cursor)::boolean
       OR (created_at, id) < (sqlc.arg(before_created_at)::timestamptz, sqlc.arg(before_id)::text))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows);

-- name: AnomalyListOpen :many
SELECT * FROM anomalies WHERE resolved_at IS NULL
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows);

-- name: AnomalyListResolved :many
SELECT * FROM anomalies WHERE resolved_at IS NOT NULL
ORDER BY resolved_at DESC, id DESC
LIMIT sqlc.arg(max_rows);

-- name: AnomalyListForAttempt :many
SELECT * FROM anomalies WHERE attempt_id = $1 ORDER BY created_at, id;

-- name: AnomalyCountOpen :one
SELECT count(*)::bigint FROM anomalies WHERE resolved_at IS NULL;

-- AnomalyResolve resolves an open anomaly; no row when it is resolved
-- already (or does not exist), so a form sent twice resolves it once.
-- name: AnomalyResolve :one
UPDATE anomalies
SET resolved_at = now(), resolved_by = sqlc.arg(resolved_by), resolution_note = sqlc.arg(note)
WHERE id = sqlc.arg(id) AND resolved_at IS NULL
RETURNING *;

-- name: AnomalyGetByID :one
SELECT * FROM anomalies WHERE id = $1;

-- AttemptListStuck is the oldest unresolved payments that have not moved
-- for quiet_ms (the console's "needs attention"); it reads the partial
-- index of unresolved attempts, so it costs the backlog.
-- name: AttemptListStuck :many
SELECT * FROM payment_attempts
WHERE status IN ('CREATED', 'PENDING', 'UNKNOWN')
  AND updated_at < now() - sqlc.arg(quiet_ms)::bigint * interval '1 millisecond'
ORDER BY created_at, id
LIMIT sqlc.arg(max_rows);
