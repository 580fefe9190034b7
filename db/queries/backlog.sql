-- AttemptBacklogByStatus summarises the unresolved attempts per status: how
-- many, how many a human must look at (needs_review is only ever set on
-- unresolved attempts), and how long ago the oldest was created. The status
-- list repeats payment_attempts_unresolved_idx, so it reads the backlog, not
-- the table. Statuses without attempts are absent. Run on every scrape of
-- /metrics (internal/metrics/dbcollector.go).
-- name: AttemptBacklogByStatus :many
SELECT status,
       count(*)::bigint                                         AS unresolved,
       count(*) FILTER (WHERE needs_review)::bigint             AS needs_review,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_seconds
FROM payment_attempts
WHERE status IN ('CREATED', 'PENDING', 'UNKNOWN')
GROUP BY status;
