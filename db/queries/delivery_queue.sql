-- The delivery queue of the merchant webhooks (internal/delivery): the
-- relay's fan-out, the pods' claims, and the attempts' results.

-- DeliveryFanout turns events the outbox relay has just published into one
-- pending delivery per live endpoint of the event's tenant that subscribes
-- to its type and existed when the event was created, and keeps each event's
-- body once. It runs in the relay's marking transaction, whose claim is
-- exclusive, and ON CONFLICT makes a repeat (a relay that crashed after
-- committing nothing, then publishes again) add nothing. It returns how many
-- deliveries it made, and wakes the pods' deliverers for them at commit.
-- Set-returning functions in one select list advance in lockstep, so ev
-- zips the arrays (sqlc cannot type the multi-argument unnest).
-- name: DeliveryFanout :one
WITH ev AS (
    SELECT unnest(sqlc.arg(event_ids)::text[])          AS event_id,
           unnest(sqlc.arg(tenant_ids)::text[])         AS tenant_id,
           unnest(sqlc.arg(event_types)::text[])        AS event_type,
           unnest(sqlc.arg(payment_ids)::text[])        AS payment_id,
           unnest(sqlc.arg(bodies)::bytea[])            AS body,
           unnest(sqlc.arg(created_ats)::timestamptz[]) AS created_at
), fanned AS (
    INSERT INTO webhook_deliveries (id, tenant_id, endpoint_id, event_id, event_type, payment_id, status, next_attempt_at)
    SELECT 'whd_' || left(replace(gen_random_uuid()::text, '-', ''), 24),
           ev.tenant_id, e.id, ev.event_id, ev.event_type, ev.payment_id, 'pending', now()
    FROM ev
    JOIN webhook_endpoints AS e
      ON e.tenant_id = ev.tenant_id AND e.deleted_at IS NULL AND e.created_at <= ev.created_at
     AND (e.event_types IS NULL OR ev.event_type = ANY (e.event_types))
    ON CONFLICT (endpoint_id, event_id) DO NOTHING
    RETURNING event_id
), messages AS (
    INSERT INTO webhook_messages (event_id, tenant_id, event_type, payment_id, body, created_at)
    SELECT ev.event_id, ev.tenant_id, ev.event_type, ev.payment_id, ev.body, ev.created_at
    FROM ev
    WHERE ev.event_id IN (SELECT event_id FROM fanned)
    ON CONFLICT (event_id) DO NOTHING
), notified AS (
    SELECT pg_notify('webhook_deliveries', '') FROM (SELECT 1 FROM fanned LIMIT 1) AS any_fanned
)
SELECT (SELECT count(*) FROM fanned)::bigint AS deliveries, (SELECT count(*) FROM notified)::bigint AS notified;

-- DeliveryClaim takes up to max_rows due deliveries for this pod, oldest
-- due first, at most per_endpoint of any one endpoint counting those the pod
-- holds already (held_endpoint_ids with held_counts; the endpoints it holds
-- per_endpoint of are in full_endpoint_ids, which the scan skips outright),
-- and at most unknown_per_endpoint of an endpoint not in held_endpoint_ids.
-- The scan reads scan_rows due rows without locking them; only the rows
-- picked are locked, with SKIP LOCKED and their due time checked again on the
-- row as it is, so pods claim disjoint rows at once and never a row another
-- pod has just claimed. A claim is a lease: claimed_until moves lease_ms
-- ahead, past the attempt, and lease grows, so a pod that dies holding it
-- loses it by itself and a late answer of an older claim changes no state.
-- Neither column is indexed: the claim is a HOT update.
-- Each row comes with what its attempt needs: the endpoint's URL and
-- secrets (the previous one while it still signs, else empty), and the body.
-- name: DeliveryClaim :many
WITH held AS (
    SELECT unnest(sqlc.arg(held_endpoint_ids)::text[]) AS endpoint_id,
           unnest(sqlc.arg(held_counts)::int[])        AS n
), due AS (
    SELECT d.id, d.endpoint_id, d.next_attempt_at
    FROM webhook_deliveries AS d
    WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND d.claimed_until <= now()
      AND d.endpoint_id <> ALL (COALESCE(sqlc.arg(full_endpoint_ids)::text[], '{}'))
    ORDER BY d.next_attempt_at
    LIMIT sqlc.arg(scan_rows)
), ranked AS (
    SELECT due.id, due.next_attempt_at,
           row_number() OVER (PARTITION BY due.endpoint_id ORDER BY due.next_attempt_at, due.id)
             + COALESCE(held.n, sqlc.arg(per_endpoint)::int - sqlc.arg(unknown_per_endpoint)::int) AS pos
    FROM due
    LEFT JOIN held ON held.endpoint_id = due.endpoint_id
), picked AS (
    SELECT ranked.id FROM ranked
    WHERE ranked.pos <= sqlc.arg(per_endpoint)::int
    ORDER BY ranked.next_attempt_at
    LIMIT sqlc.arg(max_rows)
), locked AS (
    SELECT d.id FROM webhook_deliveries AS d
    WHERE d.id IN (SELECT id FROM picked) AND d.status = 'pending' AND d.next_attempt_at <= now() AND d.claimed_until <= now()
    FOR UPDATE SKIP LOCKED
)
UPDATE webhook_deliveries AS d
SET claimed_until = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond',
    lease         = d.lease + 1
FROM locked, webhook_endpoints AS e, webhook_messages AS m
WHERE d.id = locked.id AND e.id = d.endpoint_id AND e.deleted_at IS NULL AND m.event_id = d.event_id
RETURNING d.id, d.lease, d.schedule_step, d.attempts, d.event_id, d.endpoint_id, e.url, e.secret,
          COALESCE(CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret END, '')::text AS previous_secret,
          m.body;

-- DeliveryRecord stores a batch of attempts' results, each with its audit
-- row. outcome is what the attempt means for a delivery still claimed by it
-- (its lease): 'delivered', 'retry' (due again delay_ms from now, one more
-- retry of the schedule spent) or 'failed'. A 2xx delivers whatever the
-- claim; any other answer to a superseded claim (a manual retry, or a lease
-- that lapsed and another pod's claim) or to a delivery no longer pending
-- only counts the attempt. A status_code of 0 and an empty error mean none.
-- It returns each delivery's status before and after.
-- name: DeliveryRecord :many
WITH r AS (
    SELECT unnest(sqlc.arg(ids)::text[])          AS id,
           unnest(sqlc.arg(leases)::bigint[])     AS lease,
           unnest(sqlc.arg(outcomes)::text[])     AS outcome,
           unnest(sqlc.arg(reasons)::text[])      AS reason,
           unnest(sqlc.arg(status_codes)::int[])  AS status_code,
           unnest(sqlc.arg(errors)::text[])       AS error,
           unnest(sqlc.arg(delays_ms)::bigint[])  AS delay_ms,
           unnest(sqlc.arg(durations_ms)::int[])  AS duration_ms
), old AS (
    SELECT d.id, d.status, (d.status = 'pending' AND d.lease = r.lease) AS claimed
    FROM webhook_deliveries AS d JOIN r ON r.id = d.id
    ORDER BY d.id
    FOR UPDATE OF d
), recorded AS (
    UPDATE webhook_deliveries AS d
    SET attempts         = d.attempts + 1,
        status           = CASE WHEN r.outcome = 'delivered' THEN 'delivered'
                                WHEN old.claimed AND r.outcome = 'retry' THEN 'pending'
                                WHEN old.claimed THEN 'failed'
                                ELSE d.status END,
        next_attempt_at  = CASE WHEN r.outcome = 'delivered' THEN NULL
                                WHEN old.claimed AND r.outcome = 'retry' THEN now() + r.delay_ms * interval '1 millisecond'
                                WHEN old.claimed THEN NULL
                                ELSE d.next_attempt_at END,
        claimed_until    = CASE WHEN old.claimed OR r.outcome = 'delivered' THEN 'epoch' ELSE d.claimed_until END,
        schedule_step    = CASE WHEN old.claimed AND r.outcome = 'retry' THEN d.schedule_step + 1 ELSE d.schedule_step END,
        last_status_code = CASE WHEN old.claimed OR r.outcome = 'delivered' THEN NULLIF(r.status_code, 0) ELSE d.last_status_code END,
        last_error       = CASE WHEN old.claimed OR r.outcome = 'delivered' THEN NULLIF(r.error, '') ELSE d.last_error END,
        delivered_at     = CASE WHEN r.outcome = 'delivered' THEN COALESCE(d.delivered_at, now()) ELSE d.delivered_at END,
        updated_at       = now()
    FROM r, old
    WHERE d.id = r.id AND old.id = r.id
    RETURNING d.id, d.attempts, d.status, old.status AS from_status, r.reason, r.status_code, r.error, r.duration_ms
)
INSERT INTO webhook_delivery_events (delivery_id, from_status, to_status, source, reason, attempt, status_code, error, duration_ms)
SELECT id, from_status, status, 'worker', reason, attempts, NULLIF(status_code, 0), NULLIF(error, ''), duration_ms
FROM recorded
RETURNING delivery_id, from_status, to_status;

-- DeliveryRelease gives back claims this pod will not attempt (it is
-- stopping, or the endpoint stopped keeping up): claimable again at once, by
-- any pod, with no attempt counted.
-- name: DeliveryRelease :execrows
UPDATE webhook_deliveries AS d
SET claimed_until = 'epoch', lease = d.lease + 1
FROM (
    SELECT unnest(sqlc.arg(ids)::text[]) AS id, unnest(sqlc.arg(leases)::bigint[]) AS lease
) AS r
WHERE d.id = r.id AND d.lease = r.lease AND d.status = 'pending';
