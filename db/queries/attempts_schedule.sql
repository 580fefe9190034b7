-- AttemptClaimDue takes a batch of unresolved attempts that are old enough and
-- due, and pushes their next_check_at out by a lease in the same statement, so
-- that once it commits another reconciler's claim no longer sees them as due
-- (and while it runs, SKIP LOCKED makes the other claim pass them by). The
-- status list, the filter and the order repeat payment_attempts_unresolved_idx
-- (partial on the same statuses, on (next_check_at NULLS FIRST, updated_at)),
-- so the scan reads the index in order and stops at the LIMIT: a run costs
-- what is due, not what the table holds. updated_at is not touched: it is
-- the attempt's "last change", which a look-up is not.
-- name: AttemptClaimDue :many
WITH due AS (
    SELECT id
    FROM payment_attempts
    WHERE status IN ('CREATED', 'PENDING', 'UNKNOWN')
      AND (next_check_at IS NULL OR next_check_at <= now())
      AND updated_at < now() - sqlc.arg(min_age_ms)::bigint * interval '1 millisecond'
    ORDER BY next_check_at NULLS FIRST, updated_at
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE SKIP LOCKED
)
UPDATE payment_attempts AS a
SET next_check_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
FROM due
WHERE a.id = due.id
RETURNING a.id, a.status, a.check_count, a.needs_review;

-- AttemptScheduleNextCheck records one check that left the attempt
-- unresolved: the new check count, when to ask again, and whether a human
-- must look (needs_review is never cleared here). Resolved attempts are left
-- alone (the status guard), whoever resolved them.
-- name: AttemptScheduleNextCheck :execrows
UPDATE payment_attempts
SET check_count   = sqlc.arg(check_count),
    next_check_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond',
    needs_review  = needs_review OR sqlc.arg(needs_review)::boolean
WHERE id = sqlc.arg(id) AND status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- AttemptReleaseClaims hands claimed attempts back without counting a check
-- (the key was busy, or the run stopped before reaching them): they are due
-- again after delay_ms.
-- name: AttemptReleaseClaims :execrows
UPDATE payment_attempts
SET next_check_at = now() + sqlc.arg(delay_ms)::bigint * interval '1 millisecond'
WHERE id = ANY (sqlc.arg(ids)::text[]) AND status IN ('CREATED', 'PENDING', 'UNKNOWN');

-- AttemptClaimExpired takes a batch of AUTHORIZED payments whose
-- capture_before has passed, that no capture or void (not FAILED) holds,
-- and that are due, and pushes their next check out by a lease, as
-- AttemptClaimDue does (payment_attempts_authorized_idx).
-- name: AttemptClaimExpired :many
WITH due AS (
    SELECT a.id
    FROM payment_attempts AS a
    WHERE a.status = 'AUTHORIZED' AND a.capture_before <= now()
      AND (a.next_check_at IS NULL OR a.next_check_at <= now())
      AND NOT EXISTS (SELECT 1 FROM captures AS c WHERE c.payment_id = a.id AND c.status <> 'FAILED')
    ORDER BY a.capture_before
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE OF a SKIP LOCKED
)
UPDATE payment_attempts AS a
SET next_check_at = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
FROM due
WHERE a.id = due.id
RETURNING a.id;

-- AttemptListForSettle returns what settlement compares of the attempts that
-- a day's provider charges name.
-- name: AttemptListForSettle :many
SELECT id, status, provider, provider_charge_id, amount, currency, amount_captured
FROM payment_attempts
WHERE id = ANY (sqlc.arg(ids)::text[]);

-- AttemptListSucceededCreatedBetween pages (keyset on created_at, id) through
-- the SUCCEEDED attempts created in [from_time, to_time), for settlement's
-- "missing at the provider" check. Once a day, over one day of attempts.
-- name: AttemptListSucceededCreatedBetween :many
SELECT id, provider, provider_charge_id, amount, currency, created_at, amount_captured
FROM payment_attempts
WHERE status = 'SUCCEEDED'
  AND created_at >= sqlc.arg(from_time) AND created_at < sqlc.arg(to_time)
  AND (created_at, id) > (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::text)
ORDER BY created_at, id
LIMIT sqlc.arg(max_rows);
