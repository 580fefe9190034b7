-- name: RefundInsert :one
INSERT INTO refunds (
    id, tenant_id, payment_id, idempotency_key, amount, currency, reason, metadata, status, provider
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, 'CREATED', $9
)
RETURNING *;

-- name: RefundGetByID :one
SELECT * FROM refunds WHERE id = $1;

-- name: RefundGetForTenant :one
SELECT * FROM refunds WHERE tenant_id = $1 AND id = $2;

-- name: RefundGetByProviderRefundID :one
SELECT * FROM refunds WHERE provider_refund_id = $1;

-- name: RefundGetForUpdate :one
SELECT * FROM refunds WHERE id = $1 FOR UPDATE;

-- RefundTransition moves a refund only if it is still in the status the
-- caller read (see AttemptTransition).
-- name: RefundTransition :one
UPDATE refunds
SET status             = sqlc.arg(to_status),
    provider_refund_id = COALESCE(sqlc.narg(provider_refund_id), provider_refund_id),
    failure_code       = COALESCE(sqlc.narg(failure_code), failure_code),
    updated_at         = now()
WHERE id = sqlc.arg(id) AND status = sqlc.arg(from_status)
RETURNING *;

-- name: RefundTouch :exec
UPDATE refunds SET updated_at = now()
WHERE id = $1 AND status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- name: RefundEventInsert :exec
INSERT INTO refund_events (refund_id, from_status, to_status, source, reason)
VALUES ($1, $2, $3, $4, $5);

-- name: RefundEventList :many
SELECT * FROM refund_events WHERE refund_id = $1 ORDER BY id;

-- name: RefundQuietFor :one
SELECT (updated_at < now() - sqlc.arg(quiet_ms)::bigint * interval '1 millisecond')::boolean AS quiet
FROM refunds WHERE id = sqlc.arg(id);

-- RefundListPage is one page of a payment's refunds, newest first, after the
-- cursor when has_cursor; keyset on refunds_payment_created_idx.
-- name: RefundListPage :many
SELECT * FROM refunds
WHERE payment_id = sqlc.arg(payment_id)
  AND (NOT sqlc.arg(has_cursor)::boolean
       OR (created_at, id) < (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::text))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows);

-- name: RefundListUnresolvedByPayment :many
SELECT id FROM refunds
WHERE payment_id = $1 AND status IN ('PENDING', 'UNKNOWN')
ORDER BY created_at, id;

-- RefundClaimDue is AttemptClaimDue for refunds (refunds_unresolved_idx).
-- name: RefundClaimDue :many
WITH due AS (
    SELECT id
    FROM refunds
    WHERE status IN ('CREATED', 'PENDING', 'UNKNOWN')
      AND (next_check_at IS NULL OR next_check_at <= now())
      AND updated_at < now() - sqlc.arg(min_age_ms)::bigint * interval '1 millisecond'
    ORDER BY next_check_at NULLS FIRST, updated_at
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE SKIP LOCKED
)
UPDATE refunds AS r
SET next_check_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
FROM due
WHERE r.id = due.id
RETURNING r.id, r.status, r.check_count, r.needs_review;

-- name: RefundScheduleNextCheck :execrows
UPDATE refunds
SET check_count   = sqlc.arg(check_count),
    next_check_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond',
    needs_review  = needs_review OR sqlc.arg(needs_review)::boolean
WHERE id = sqlc.arg(id) AND status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- name: RefundReleaseClaims :execrows
UPDATE refunds
SET next_check_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond'
WHERE id = ANY (sqlc.arg(ids)::text[]) AND status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- name: RefundListByPayment :many
SELECT * FROM refunds WHERE payment_id = $1 ORDER BY created_at, id LIMIT sqlc.arg(max_rows);

-- RefundEventListByPayment is the audit of every refund of a payment, oldest
-- first (the console's timeline).
-- name: RefundEventListByPayment :many
SELECT e.* FROM refund_events AS e
JOIN refunds AS r ON r.id = e.refund_id
WHERE r.payment_id = $1
ORDER BY e.created_at, e.id;
