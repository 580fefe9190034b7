-- name: OperatorInsert :one
INSERT INTO operators (id, email, role, password_hash)
VALUES ($1, $2, $3, $4)
RETURNING *;

-- name: OperatorGetByEmail :one
SELECT * FROM operators WHERE email = $1;

-- name: OperatorList :many
SELECT * FROM operators ORDER BY email;

-- OperatorDisable marks the operator disabled and ends its sessions in one
-- statement: from its commit on, none of its cookies opens a page.
-- name: OperatorDisable :one
WITH op AS (
    UPDATE operators SET disabled_at = COALESCE(disabled_at, now())
    WHERE email = $1
    RETURNING id
), gone AS (
    DELETE FROM console_sessions WHERE operator_id IN (SELECT id FROM op)
)
SELECT id FROM op;

-- name: ConsoleSessionInsert :exec
INSERT INTO console_sessions (id_sha256, operator_id, csrf_token)
VALUES ($1, $2, $3);

-- ConsoleSessionTouch is a page view: it finds the live session (seen within
-- the idle timeout, created within its lifetime, its operator not disabled),
-- by the database clock, and records that it was seen.
-- name: ConsoleSessionTouch :one
UPDATE console_sessions AS s
SET last_seen_at = now()
FROM operators AS o
WHERE s.id_sha256 = sqlc.arg(id_sha256) AND o.id = s.operator_id AND o.disabled_at IS NULL
  AND s.last_seen_at > now() - sqlc.arg(idle_ms)::bigint * interval '1 millisecond'
  AND s.created_at > now() - sqlc.arg(lifetime_ms)::bigint * interval '1 millisecond'
RETURNING o.id, o.email, o.role, s.csrf_token;

-- name: ConsoleSessionDelete :exec
DELETE FROM console_sessions WHERE id_sha256 = $1;

-- ConsoleSessionDeleteExpired forgets one batch of sessions past their
-- lifetime or idle timeout (run at each sign-in, so the table holds about
-- the live sessions).
-- name: ConsoleSessionDeleteExpired :execrows
DELETE FROM console_sessions
WHERE id_sha256 IN (
    SELECT id_sha256 FROM console_sessions
    WHERE created_at <= now() - sqlc.arg(lifetime_ms)::bigint * interval '1 millisecond'
       OR last_seen_at <= now() - sqlc.arg(idle_ms)::bigint * interval '1 millisecond'
    LIMIT 100
);

-- ConsoleLoginAttempt counts a sign-in attempt of an email before its
-- password is checked, so that attempts racing on several pods are counted
-- one by one on this row: a window older than window_ms (and not locked)
-- starts again at 1. It returns the count within the window and whether the
-- email is locked out now.
-- name: ConsoleLoginAttempt :one
INSERT INTO console_login_failures AS f (email, failures)
VALUES (sqlc.arg(email), 1)
ON CONFLICT (email) DO UPDATE SET
    failures = CASE
        WHEN f.window_start_at <= now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond'
         AND (f.locked_until IS NULL OR f.locked_until <= now()) THEN 1
        ELSE f.failures + 1 END,
    window_start_at = CASE
        WHEN f.window_start_at <= now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond'
         AND (f.locked_until IS NULL OR f.locked_until <= now()) THEN now()
        ELSE f.window_start_at END
RETURNING failures, (locked_until IS NOT NULL AND locked_until > now())::boolean AS locked;

-- ConsoleLoginLock locks the email out for lock_ms once the attempt that
-- just failed was the max_failures-th of its window.
-- name: ConsoleLoginLock :exec
UPDATE console_login_failures
SET locked_until = now() + sqlc.arg(lock_ms)::bigint * interval '1 millisecond'
WHERE email = sqlc.arg(email) AND failures >= sqlc.arg(max_failures)::integer
  AND (locked_until IS NULL OR locked_until <= now());

-- name: ConsoleLoginSucceeded :exec
DELETE FROM console_login_failures WHERE email = $1;

-- ConsoleLoginPrune forgets one batch of emails whose window and lockout
-- are over, so that guessed emails do not pile up.
-- name: ConsoleLoginPrune :execrows
DELETE FROM console_login_failures
WHERE email IN (
    SELECT email FROM console_login_failures
    WHERE window_start_at <= now() - sqlc.arg(window_ms)::bigint * interval '1 millisecond'
      AND (locked_until IS NULL OR locked_until <= now())
    LIMIT 100
);
