-- +goose Up
-- A key's expiry counts from the moment its final answer is stored
-- (IdemKeyComplete, IdemKeyCompleteMoved) or its payment or refund became
-- final without it (IdemKeyResolvedBy*), no longer from the key's creation.
-- The keys written before get the expiry the new rule gives them, with the
-- TTL they were created with (expires_at - created_at):
--   * a key with a stored answer: from the answer (updated_at, which the
--     completion set and nothing writes after it);
--   * a key without one whose payment or refund is final (a webhook
--     resolved it): from the last change of the key or of its subject,
--     whichever is later (the resolution, or a refund's amounts after it;
--     later is on the safe side: gc deletes later).
-- Keys of unresolved payments and refunds keep theirs: gc never deletes
-- them, and their resolution starts their expiry. A key whose expiry would
-- move by less than a second (an answer given at once) is left as it is,
-- so only the rows that change are rewritten.
UPDATE idempotency_keys AS k
SET expires_at = f.expires_at
FROM (
    SELECT k2.tenant_id, k2.key,
           CASE WHEN k2.response_code IS NOT NULL THEN k2.updated_at
                ELSE GREATEST(k2.updated_at, COALESCE(a.updated_at, r.updated_at))
           END + (k2.expires_at - k2.created_at) AS expires_at
    FROM idempotency_keys AS k2
    LEFT JOIN payment_attempts AS a ON a.id = k2.attempt_id
    LEFT JOIN refunds AS r ON r.id = k2.refund_id
    WHERE k2.response_code IS NOT NULL OR COALESCE(a.status, r.status) IN ('SUCCEEDED', 'FAILED')
) AS f
WHERE k.tenant_id = f.tenant_id AND k.key = f.key
  AND f.expires_at > k.expires_at + interval '1 second';

-- +goose Down
-- The creation-based expiry is not restored: the keys keep the later one,
-- which deletes nothing a rollback would still need.
SELECT 1;
