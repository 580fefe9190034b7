-- Captures and voids of AUTHORIZED payments (internal/captures). Their
-- lifecycle is a refund's; see db/queries/refunds.sql for the queries of the
-- same name.

-- name: CaptureInsert :one
INSERT INTO captures (
    id, kind, tenant_id, payment_id, idempotency_key, amount, currency, reason, status, provider
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, 'CREATED', $9
)
RETURNING *;

-- name: CaptureGetByID :one
SELECT * FROM captures WHERE id = $1;

-- name: CaptureGetForTenant :one
SELECT * FROM captures WHERE tenant_id = $1 AND id = $2 AND kind = $3;

-- name: CaptureGetForUpdate :one
SELECT * FROM captures WHERE id = $1 FOR UPDATE;

-- The payment's capture or void that is not FAILED, if any
-- (captures_one_live_per_payment: at most one).
-- name: CaptureGetLiveForPayment :one
SELECT * FROM captures WHERE payment_id = $1 AND status <> 'FAILED';

-- name: CaptureListByPayment :many
SELECT * FROM captures WHERE payment_id = $1 ORDER BY created_at, id;

-- CaptureTransition moves a capture or void only if it is still in the
-- status the caller read (see AttemptTransition).
-- name: CaptureTransition :one
UPDATE captures
SET status       = sqlc.arg(to_status),
    failure_code = COALESCE(sqlc.narg(failure_code), failure_code),
    updated_at   = now()
WHERE id = sqlc.arg(id) AND status = sqlc.arg(from_status)
RETURNING *;

-- name: CaptureTouch :exec
UPDATE captures SET updated_at = now()
WHERE id = $1 AND status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- name: CaptureEventInsert :exec
INSERT INTO capture_events (capture_id, from_status, to_status, source, reason)
VALUES ($1, $2, $3, $4, $5);

-- name: CaptureEventList :many
SELECT to_status FROM capture_events WHERE capture_id = $1 ORDER BY id;

-- name: CaptureQuietFor :one
SELECT (updated_at < now() - sqlc.arg(quiet_ms)::bigint * interval '1 millisecond')::boolean AS quiet
FROM captures WHERE id = sqlc.arg(id);

-- CaptureClaimDue is AttemptClaimDue for the captures (or the voids:
-- kind) that are unresolved (captures_unresolved_idx).
-- name: CaptureClaimDue :many
WITH due AS (
    SELECT u.id
    FROM captures AS u
    WHERE u.kind = sqlc.arg(kind)::text AND u.status IN ('CREATED', 'PENDING', 'UNKNOWN')
      AND (u.next_check_at IS NULL OR u.next_check_at <= now())
      AND u.updated_at < now() - sqlc.arg(min_age_ms)::bigint * interval '1 millisecond'
    ORDER BY u.next_check_at NULLS FIRST, u.updated_at
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE SKIP LOCKED
)
UPDATE captures AS c
SET next_check_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
FROM due
WHERE c.id = due.id
RETURNING c.id, c.status, c.check_count, c.needs_review;

-- name: CaptureScheduleNextCheck :execrows
UPDATE captures
SET check_count   = sqlc.arg(check_count),
    next_check_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond',
    needs_review  = needs_review OR sqlc.arg(needs_review)::boolean
WHERE id = sqlc.arg(id) AND status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- name: CaptureReleaseClaims :execrows
UPDATE captures
SET next_check_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond'
WHERE id = ANY (sqlc.arg(ids)::text[]) AND status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- CaptureEventListByPayment is the audit of every capture and void of a
-- payment, oldest first (the console's timeline).
-- name: CaptureEventListByPayment :many
SELECT e.*, c.kind, c.provider FROM capture_events AS e
JOIN captures AS c ON c.id = e.capture_id
WHERE c.payment_id = $1
ORDER BY e.created_at, e.id;
