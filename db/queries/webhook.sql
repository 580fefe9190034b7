-- Claims a provider event: of any number of deliveries of one event, on any
-- number of pods, exactly one inserts the row (the others wait for its
-- transaction and then affect no row), so an event is applied at most once.
-- The outcome is set by WebhookEventSetOutcome in the same transaction.
-- name: WebhookEventInsert :execrows
INSERT INTO webhook_events (provider, event_id, type, charge_id, outcome, payload)
VALUES (
    sqlc.arg(provider), sqlc.arg(event_id), sqlc.arg(type),
    sqlc.narg(charge_id), 'received', sqlc.arg(payload)
)
ON CONFLICT (provider, event_id) DO NOTHING;

-- name: WebhookEventSetOutcome :exec
UPDATE webhook_events
SET outcome = sqlc.arg(outcome), attempt_id = sqlc.narg(attempt_id)
WHERE provider = sqlc.arg(provider) AND event_id = sqlc.arg(event_id);

-- WebhookEventDeleteReceivedBefore deletes one batch of events received more
-- than age_ms ago (by the database clock), oldest first. Every stored event
-- is processed (its outcome is set in the transaction that inserts it);
-- deleting it only forgets its id, so a redelivery after that is applied
-- again, which the state machine makes a no-op. SKIP LOCKED passes over a
-- row a webhook's transaction holds.
-- name: WebhookEventDeleteReceivedBefore :execrows
DELETE FROM webhook_events
WHERE (provider, event_id) IN (
    SELECT provider, event_id
    FROM webhook_events
    WHERE received_at < now() - sqlc.arg(age_ms)::bigint * interval '1 millisecond'
    ORDER BY received_at
    LIMIT sqlc.arg(max_rows)
    FOR UPDATE SKIP LOCKED
);

-- WebhookEventListByAttempt is every provider webhook recorded for a
-- payment, oldest first (the console's payment page).
-- name: WebhookEventListByAttempt :many
SELECT provider, event_id, type, charge_id, outcome, received_at
FROM webhook_events
WHERE attempt_id = $1
ORDER BY received_at, event_id;
