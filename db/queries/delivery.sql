-- The merchant webhooks' endpoints and the deliveries API (internal/delivery).
-- The queue's claims and results are in delivery_queue.sql.

-- EndpointLockTenant serialises the endpoint writes of one tenant for the
-- rest of the transaction, so that the count of its endpoints cannot be
-- raced past the limit by creates on several pods.
-- name: EndpointLockTenant :exec
SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints/' || sqlc.arg(tenant_id)::text, 0));

-- name: EndpointCountLive :one
SELECT count(*) FROM webhook_endpoints WHERE tenant_id = $1 AND deleted_at IS NULL;

-- name: EndpointInsert :one
INSERT INTO webhook_endpoints (id, tenant_id, url, event_types, description, secret)
VALUES ($1, $2, $3, sqlc.narg(event_types)::text[], sqlc.narg(description), sqlc.arg(secret)::text)
RETURNING *;

-- name: EndpointEventInsert :exec
INSERT INTO webhook_endpoint_events (endpoint_id, kind) VALUES ($1, $2);

-- name: EndpointGetForTenant :one
SELECT * FROM webhook_endpoints WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL;

-- EndpointListPage is one page of a tenant's endpoints, newest first, after
-- the cursor when has_cursor; keyset on webhook_endpoints_tenant_created_idx.
-- name: EndpointListPage :many
SELECT * FROM webhook_endpoints
WHERE tenant_id = sqlc.arg(tenant_id) AND deleted_at IS NULL
  AND (NOT sqlc.arg(has_cursor)::boolean
       OR (created_at, id) < (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::text))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows);

-- EndpointRotate makes new_secret the endpoint's secret; the one it
-- replaces signs beside it for overlap_ms (a rotation within that time drops
-- the oldest).
-- name: EndpointRotate :one
UPDATE webhook_endpoints
SET previous_secret            = secret,
    previous_secret_expires_at = now() + sqlc.arg(overlap_ms)::bigint * interval '1 millisecond',
    secret                     = sqlc.arg(new_secret)::text,
    updated_at                 = now()
WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id) AND deleted_at IS NULL
RETURNING *;

-- EndpointDelete marks the endpoint deleted and forgets its secrets.
-- name: EndpointDelete :execrows
UPDATE webhook_endpoints
SET deleted_at = now(), secret = NULL, previous_secret = NULL, previous_secret_expires_at = NULL, updated_at = now()
WHERE tenant_id = $1 AND id = $2 AND deleted_at IS NULL;

-- DeliveryFailForEndpoint ends the pending deliveries of a deleted
-- endpoint, with their audit rows: no attempt of them starts afterwards.
-- name: DeliveryFailForEndpoint :execrows
WITH ended AS (
    UPDATE webhook_deliveries
    SET status = 'failed', next_attempt_at = NULL, last_error = 'endpoint deleted', lease = lease + 1, updated_at = now()
    WHERE endpoint_id = $1 AND status = 'pending'
    RETURNING id
)
INSERT INTO webhook_delivery_events (delivery_id, from_status, to_status, source, reason)
SELECT id, 'pending', 'failed', 'api', 'endpoint_deleted' FROM ended;

-- name: DeliveryGetForTenant :one
SELECT d.* FROM webhook_deliveries AS d
JOIN webhook_endpoints AS e ON e.id = d.endpoint_id AND e.deleted_at IS NULL
WHERE d.tenant_id = $1 AND d.id = $2;

-- DeliveryListPage is one page of an endpoint's deliveries, newest first,
-- after the cursor when has_cursor.
-- name: DeliveryListPage :many
SELECT * FROM webhook_deliveries
WHERE endpoint_id = sqlc.arg(endpoint_id)
  AND (NOT sqlc.arg(has_cursor)::boolean
       OR (created_at, id) < (sqlc.arg(after_created_at)::timestamptz, sqlc.arg(after_id)::text))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(max_rows);

-- DeliveryGetForUpdate locks a delivery of the tenant whose endpoint is not
-- deleted, for a manual retry.
-- name: DeliveryGetForUpdate :one
SELECT d.* FROM webhook_deliveries AS d
JOIN webhook_endpoints AS e ON e.id = d.endpoint_id AND e.deleted_at IS NULL
WHERE d.tenant_id = $1 AND d.id = $2
FOR UPDATE OF d;

-- DeliveryRetry makes a delivery that is not delivered due now with a
-- fresh schedule; a superseded claim's late answer then changes no state
-- (lease).
-- name: DeliveryRetry :one
UPDATE webhook_deliveries
SET status = 'pending', next_attempt_at = now(), claimed_until = 'epoch', schedule_step = 0, lease = lease + 1, updated_at = now()
WHERE id = $1 AND status <> 'delivered'
RETURNING *;

-- name: DeliveryNotify :exec
SELECT pg_notify('webhook_deliveries', '');

-- DeliveryListen subscribes the session to the wake-ups of the fan-out and
-- of manual retries (DeliveryNotify), sent when their transaction commits.
-- name: DeliveryListen :exec
LISTEN webhook_deliveries;

-- DeliveryStats is the backlog: pending deliveries and the age of the oldest.
-- name: DeliveryStats :one
SELECT count(*)::bigint AS pending,
       COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS oldest_seconds
FROM webhook_deliveries
WHERE status = 'pending';

-- The console's reads and its retry (internal/console).

-- DeliveryListByPayment is every delivery of a payment's events, oldest
-- first, with its endpoint's URL (a deleted endpoint's too), at most
-- max_rows (webhook_deliveries_payment_idx).
-- name: DeliveryListByPayment :many
SELECT sqlc.embed(d), e.url AS endpoint_url, (e.deleted_at IS NOT NULL)::boolean AS endpoint_deleted
FROM webhook_deliveries AS d
JOIN webhook_endpoints AS e ON e.id = d.endpoint_id
WHERE d.payment_id = sqlc.arg(payment_id)
ORDER BY d.created_at, d.id
LIMIT sqlc.arg(max_rows);

-- DeliveryCountFailing counts the deliveries that are failing: pending
-- after at least one attempt without a 2xx (webhook_deliveries_due_idx),
-- and failed within the last since_ms (webhook_deliveries_failed_idx).
-- name: DeliveryCountFailing :one
SELECT ((SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND attempts > 0)
      + (SELECT count(*) FROM webhook_deliveries
         WHERE status = 'failed' AND updated_at > now() - sqlc.arg(since_ms)::bigint * interval '1 millisecond'))::bigint
       AS failing;

-- name: DeliveryOwnerOf :one
SELECT tenant_id, payment_id FROM webhook_deliveries WHERE id = $1;

-- DeliveryEventListByPayment is the audit of the changes to a payment's
-- deliveries that someone asked for (manual retries, an endpoint's
-- deletion; not the attempts, which the deliveries' rows count), oldest
-- first (the console's timeline).
-- name: DeliveryEventListByPayment :many
SELECT e.* FROM webhook_delivery_events AS e
JOIN webhook_deliveries AS d ON d.id = e.delivery_id
WHERE d.payment_id = $1 AND e.source <> 'worker'
ORDER BY e.created_at, e.id;

-- DeliveryFormKeyUsed reports whether a console form with this key already
-- retried the delivery.
-- name: DeliveryFormKeyUsed :one
SELECT EXISTS (SELECT 1 FROM webhook_delivery_events WHERE delivery_id = $1 AND form_key = $2)::boolean AS used;

-- name: DeliveryEventInsertByForm :exec
INSERT INTO webhook_delivery_events (delivery_id, from_status, to_status, source, reason, form_key)
VALUES ($1, $2, $3, $4, $5, $6);
